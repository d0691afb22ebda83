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

/** the regex source matching one character of the token in any form a log line may hold it */
function charForms(c: string): string {
  const esc = (t: string) => t.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
  // as it is, as JSON escapes it inside a string, percent-encoded (either case of hex digits)
  const literal = [...new Set([c, JSON.stringify(c).slice(1, -1)])].map(esc);
  const pct = [...Buffer.from(c, 'utf8')]
    .map((b) => '%' + [...b.toString(16).padStart(2, '0')].map((h) => (/[a-f]/.test(h) ? `[${h}${h.toUpperCase()}]` : h)).join(''))
    .join('');
  const forms = [...literal, pct];
  if (c === ' ') forms.push('\\+'); // a form-encoded space
  return forms.length === 1 ? forms[0]! : `(?:${forms.join('|')})`;
}

/**
 * A regex matching the token wherever a line may hold it: as it is, JSON-escaped, percent-encoded
 * (a client that put it in a path or a query string: `%2F` or `%2f`, whole or in part).
 */
export function tokenPattern(token: string): RegExp {
  return new RegExp([...token].map(charForms).join(''), 'g');
}

/**
 * pino options for a logger of an app that has a token: `redact` for the known fields, and a last
 * pass over every finished line that replaces the token wherever it still is (a client that put it
 * in a query string, percent-encoded in a path, a message quoting a header, a field nobody thought of).
 */
export function loggerHygiene(token: string | null): { redact: typeof logRedaction; hooks?: { streamWrite: (line: string) => string } } {
  if (!token) return { redact: logRedaction };
  const pattern = tokenPattern(token);
  return {
    redact: logRedaction,
    hooks: { streamWrite: (line) => line.replace(pattern, '[redacted]') },
  };
}
