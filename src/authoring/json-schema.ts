/**
 * Tools' `input_schema`s as JSON Schema, compiled by a real validator (Ajv, draft-07 and its
 * strict mode: an unknown keyword such as a misspelt "requred" is an error, not a no-op).
 */
import { Ajv, type ValidateFunction } from 'ajv';

export function newValidator(): Ajv {
  // formats are not validated: a schema using "format": "date-time" still compiles
  return new Ajv({ strict: true, strictTypes: false, strictTuples: false, allErrors: true, validateFormats: false });
}

/** The compiled schema, or why it does not compile. */
export function compileSchema(ajv: Ajv, schema: Record<string, unknown>): { validate: ValidateFunction } | { problem: string } {
  try {
    return { validate: ajv.compile(schema) };
  } catch (e) {
    return { problem: (e as Error).message };
  }
}

/** Ajv's errors in one line: `/n must be integer; must have required property 'n'`. */
export function describeErrors(validate: ValidateFunction): string {
  return (validate.errors ?? []).map((e) => `${e.instancePath || '(arguments)'} ${e.message ?? 'is invalid'}`.trim()).join('; ');
}

/**
 * Arguments `validate` refuses, made from the schema: an unknown field when extra fields are
 * refused, else an object missing a required field, else a required-or-declared field of the
 * wrong type. Null when nothing simple is refused (a schema that accepts any object).
 */
export function violatingArguments(schema: Record<string, unknown>, validate: ValidateFunction): Record<string, unknown> | null {
  const candidates: Record<string, unknown>[] = [];
  const props = typeof schema.properties === 'object' && schema.properties !== null ? (schema.properties as Record<string, unknown>) : {};
  if (schema.additionalProperties === false) candidates.push({ openenv_check_unknown_field: true });
  if (Array.isArray(schema.required) && schema.required.length > 0) candidates.push({});
  for (const [name, prop] of Object.entries(props)) {
    const type = typeof prop === 'object' && prop !== null ? (prop as Record<string, unknown>).type : undefined;
    const wrong =
      type === 'string'
        ? 12345
        : type === 'object' || type === 'array' || type === 'number' || type === 'integer' || type === 'boolean'
          ? 'not-a-' + String(type)
          : undefined;
    if (wrong !== undefined) candidates.push({ [name]: wrong });
  }
  for (const c of candidates) if (!validate(c)) return c;
  return null;
}
