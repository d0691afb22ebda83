/**
 * Log hygiene: the token never reaches a log line. pino redacts the authorization header
 * wherever fastify or our code might log it; `loggerHygiene` scrubs whatever free text is left.
 */

export const logRedaction = {
  paths: [
    'req.headers.authorization',
    'headers.authorization',
    'request.headers.authorization',
    'authorization',
    'token',
    '*.token',
    // a malformed request's raw bytes (fastify logs them at trace): its path may carry /t/<token>
    'err.rawPacket',
    // the URL as the client sent it, before the /t/<token> prefix was stripped
    'req.originalUrl',
  ],
  censor: '[redacted]',
};

/**
 * pino options for a logger of an app that has a token: `redact` for the known fields, and a last
 * pass over every finished line that replaces the token wherever it still is (a client that put it
 * in a query string, a message quoting a header, a field nobody thought of).
 */
export function loggerHygiene(token: string | null): { redact: typeof logRedaction; hooks?: { streamWrite: (line: string) => string } } {
  if (!token) return { redact: logRedaction };
  // a line is JSON: the token may stand there escaped
  const forms = [...new Set([token, JSON.stringify(token).slice(1, -1)])];
  return {
    redact: logRedaction,
    hooks: { streamWrite: (line) => (forms.some((f) => line.includes(f)) ? forms.reduce((s, f) => s.split(f).join('[redacted]'), line) : line) },
  };
}
