/**
 * Log hygiene: the token never reaches a log line. pino redacts the authorization header
 * wherever fastify or our code might log it; `redactToken` scrubs free text (URLs with a token
 * prefix, messages quoting a header).
 */

export const logRedaction = {
  paths: [
    'req.headers.authorization',
    'headers.authorization',
    'request.headers.authorization',
    'authorization',
    'token',
    '*.token',
  ],
  censor: '[redacted]',
};

/** replaces every occurrence of the token (and a Bearer credential) in a string */
export function redactToken(text: string, token: string | null): string {
  let out = text.replace(/(Bearer\s+)[^\s"',]+/gi, '$1[redacted]');
  if (token) out = out.split(token).join('[redacted]');
  return out;
}
