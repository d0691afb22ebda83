/** zod → JSON Schema, one way for `/schema` and `/openapi.json` alike. */
import type { ZodTypeAny } from 'zod';
import { zodToJsonSchema } from 'zod-to-json-schema';

export function toJsonSchema(schema: ZodTypeAny): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = zodToJsonSchema(schema, { target: 'jsonSchema7', $refStrategy: 'none' }) as Record<string, unknown>;
  return rest;
}

export function isZodSchema(v: unknown): v is ZodTypeAny {
  return typeof v === 'object' && v !== null && typeof (v as { safeParse?: unknown }).safeParse === 'function';
}
