/**
 * Where an episode's model calls go, and what bounds them, as a client gives them at reset (the
 * reset's `model` and `model_budgets`) or the server's options do (--model-url, --model,
 * --model-calls…): declared once, as zod schemas, so the reset message, the options and the
 * gateway (src/gateway/) read the same shape. The upstream's headers (its own credential, a
 * trainer's session id) stay in the server: the env only ever holds its own episode credential.
 */
import { z } from 'zod';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** headers that frame the request itself: the gateway sets them, an upstream's headers may not */
const FRAMING_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect']);

export const UpstreamSchema = z
  .object({
    /** the API's base: the gateway appends /chat/completions, /responses, /messages, /models */
    base_url: z
      .string()
      .url()
      .refine((u) => /^https?:$/.test(new URL(u).protocol), 'the upstream must be an http:// or https:// URL')
      .describe('the API base the gateway forwards to (it appends /chat/completions, /responses, /messages, /models)'),
    /** sent with every call upstream (e.g. Authorization for the upstream, a session header) */
    headers: z
      .record(
        z
          .string()
          .regex(HEADER_NAME, 'not a valid HTTP header name')
          .refine((h) => !FRAMING_HEADERS.has(h.toLowerCase()), "a header that frames the request (host, content-length, connection…) is the gateway's to set"),
        z.string().refine((v) => !/[\r\n\0]/.test(v), 'a header value may not hold CR, LF or NUL'),
      )
      .default({})
      .describe("sent upstream with every call (the upstream's own credential, a session id); never given to the env"),
    /** the model every call names upstream, whatever the harness asked for; also what /v1/models lists */
    model: z.string().min(1).optional().describe('the model every call names upstream, whatever the harness asked for'),
  })
  .strict();
export type Upstream = z.infer<typeof UpstreamSchema>;
export type UpstreamInput = z.input<typeof UpstreamSchema>;

export const BudgetsSchema = z
  .object({
    /** model calls the episode may make */
    calls: z.number().int().positive().optional(),
    /** tokens (input and output: the upstream's usage, else the gateway's estimate; docs/gateway.md) the episode may use */
    tokens: z.number().int().positive().optional(),
    /** seconds from the credential's issue after which the episode's model access ends */
    wall_time_s: z.number().positive().finite().optional(),
  })
  .strict();
export type Budgets = z.infer<typeof BudgetsSchema>;
export type BudgetsInput = z.input<typeof BudgetsSchema>;

/** the model APIs the gateway serves */
export const ModelApiSchema = z.enum(['openai.chat', 'openai.responses', 'anthropic.messages', 'anthropic.count_tokens', 'openai.models']);
export type ModelApi = z.infer<typeof ModelApiSchema>;

/** a call's usage in one shape, whichever API it was */
export const ModelUsageSchema = z.object({ input_tokens: z.number(), output_tokens: z.number(), total_tokens: z.number() });
export type ModelUsage = z.infer<typeof ModelUsageSchema>;

/**
 * How a call ended: `ok` (the upstream answered 2xx and the harness got it whole),
 * `upstream_rejected` (a 4xx, passed through: the request's fault, the episode goes on),
 * `upstream_error` / `upstream_timeout` (the episode's model access ends), `refused` (the gateway
 * answered itself: no credential, unknown path, bad body, too many at once, budget spent),
 * `cut_short` (the episode's access ended, or it was revoked, while the call ran), `client_gone`
 * (the harness hung up first).
 */
export const CallOutcomeSchema = z.enum(['ok', 'upstream_rejected', 'upstream_error', 'upstream_timeout', 'refused', 'cut_short', 'client_gone']);
export type CallOutcome = z.infer<typeof CallOutcomeSchema>;

/** one model call an episode's env made through the gateway, once it is over (refused ones too) */
export const ModelCallSchema = z.object({
  episode_id: z.string(),
  seq: z.number().int().describe('1, 2, … per episode, in the order the calls arrived'),
  api: ModelApiSchema.nullable().describe('null: a path the gateway does not serve'),
  method: z.string(),
  path: z.string(),
  stream: z.boolean(),
  started_at: z.number().describe('epoch milliseconds'),
  latency_ms: z.number(),
  first_byte_ms: z.number().nullable().describe("until the upstream's first body byte (a stream's time to first token); null when none came"),
  status: z.number().int().describe('the status the harness got'),
  upstream_status: z.number().int().nullable(),
  outcome: CallOutcomeSchema,
  refusal: z.string().nullable().describe('for refused and cut_short: the code the harness was given (unauthorized, busy, a budget reason…)'),
  request: z.unknown().describe("the body as sent upstream (the episode's model in it), null when none"),
  response: z.unknown().describe('the reply as JSON; a streamed one put back together; a body that was not JSON as { text }'),
  usage: ModelUsageSchema.nullable().describe(
    "what the call counted against the token budget: the upstream's usage, else the estimate; null when the model did not run (refused, never sent, a 4xx of the upstream)",
  ),
  usage_estimated: z
    .boolean()
    .describe("true: the upstream reported no usage (or not all of it), and the usage is the gateway's estimate from the bytes sent and received"),
  error: z.string().nullable().describe('what went wrong, for a person'),
});
export type ModelCall = z.infer<typeof ModelCallSchema>;
