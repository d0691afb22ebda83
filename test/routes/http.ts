/** A curl-like request for route tests: JSON in; status, headers and JSON (or text) out. */
export async function http(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, headers: res.headers, body: json };
}
