/**
 * What E2B's Python SDK sends for slime's calls, replayed byte for byte against the server: the
 * request shapes of E2B's published API description (spec/openapi.yml's NewSandbox for
 * `AsyncSandbox.create(timeout=, metadata=)`, its DELETE for `kill()`; envd's process.proto
 * Start in Connect's JSON envelope for `commands.run(cmd, user=, envs=, timeout=, on_stdout=,
 * on_stderr=)`; envd.yaml's POST /files as application/octet-stream for `files.write(path, bytes
 * | file, user=, gzip=False, use_octet_stream=True)` and as multipart for `files.write(path,
 * str)`, its GET /files for `files.read(path, user=)`), as the Python SDK 2.x builds them (its
 * httpx and connectrpc clients: base URL + route, the sandbox headers on every envd call), and
 * each answer checked against the shape the Python SDK parses.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeDocker } from '../support/docker.js';
import { e2bSuiteServer, LOCAL_DEBIAN_IMAGE } from './helpers.js';

const PY_UA = 'e2b-python-sdk/2.22.0';

/** one Connect envelope (flags 0) of a JSON message */
function envelope(message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** a Connect stream's messages, and whether its end-of-stream message carried an error */
function readEnvelopes(body: Buffer): { messages: any[]; end: any } {
  const messages: any[] = [];
  let end: any = null;
  for (let at = 0; at < body.length;) {
    const flags = body[at]!;
    const len = body.readUInt32BE(at + 1);
    const json = JSON.parse(body.subarray(at + 5, at + 5 + len).toString('utf8'));
    if (flags & 0x02) end = json;
    else messages.push(json);
    at += 5 + len;
  }
  return { messages, end };
}

describeDocker("the Python SDK's requests for slime's calls", () => {
  const server = e2bSuiteServer(['--e2b-image-key', 'image', '--e2b-images', 'openenv-local/*']);

  describe('a sandbox as slime creates, uses and kills it', () => {
    let sandboxId = '';
    let token = '';
    const envdHeaders = (extra: Record<string, string> = {}) => ({
      'user-agent': PY_UA,
      'e2b-sandbox-id': sandboxId,
      'e2b-sandbox-port': '49983',
      'x-access-token': token,
      ...extra,
    });
    const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString('base64')}`;

    it('AsyncSandbox.create(timeout=3600, metadata={image, size}): POST /sandboxes, NewSandbox', async () => {
      const res = await fetch(`${server.env.E2B_API_URL}/sandboxes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': server.token, 'user-agent': PY_UA },
        // the Python SDK's NewSandbox.to_dict(): its default template, secure, internet access on, empty envVars
        body: JSON.stringify({
          templateID: 'base',
          metadata: { image: LOCAL_DEBIAN_IMAGE, size: 'md' },
          timeout: 3600,
          envVars: {},
          secure: true,
          allow_internet_access: true,
        }),
      });
      expect(res.status).toBe(201);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({
        sandboxID: expect.any(String),
        templateID: 'base',
        clientID: expect.any(String),
        envdVersion: expect.any(String),
        envdAccessToken: expect.any(String),
      });
      // the Python SDK compares envd versions (packaging.version): one it parses, at least 0.1.0
      expect(body.envdVersion).toMatch(/^\d+\.\d+\.\d+$/);
      sandboxId = body.sandboxID as string;
      token = body.envdAccessToken as string;
    });

    it('commands.run(cmd, user="root", envs=..., timeout=120, on_stdout=, on_stderr=): Start in a Connect JSON envelope, streamed', async () => {
      const res = await fetch(`${server.env.E2B_SANDBOX_URL}/process.Process/Start`, {
        method: 'POST',
        headers: envdHeaders({
          'content-type': 'application/connect+json',
          'connect-protocol-version': '1',
          'connect-timeout-ms': '120000',
          'keepalive-ping-interval': '50',
          authorization: basic('root'),
        }),
        body: envelope({
          process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo "$GREETING"; echo warn >&2; id -un'], envs: { GREETING: 'hi' } },
          stdin: false,
        }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/connect+json');
      const { messages, end } = readEnvelopes(Buffer.from(await res.arrayBuffer()));
      expect(end).toEqual({});
      const events = messages.map((m) => m.event);
      expect(events[0]).toEqual({ start: { pid: expect.any(Number) } });
      const stdout = events
        .filter((e) => e.data?.stdout)
        .map((e) => Buffer.from(e.data.stdout, 'base64').toString())
        .join('');
      const stderr = events
        .filter((e) => e.data?.stderr)
        .map((e) => Buffer.from(e.data.stderr, 'base64').toString())
        .join('');
      expect(stdout).toBe('hi\nroot\n');
      expect(stderr).toBe('warn\n');
      expect(events[events.length - 1]).toEqual({ end: { exitCode: 0, exited: true, status: 'exit status 0' } });
    });

    it('a non-zero exit: the end event carries exitCode and error (CommandExitException)', async () => {
      const res = await fetch(`${server.env.E2B_SANDBOX_URL}/process.Process/Start`, {
        method: 'POST',
        headers: envdHeaders({
          'content-type': 'application/connect+json',
          'connect-protocol-version': '1',
          'connect-timeout-ms': '30000',
          authorization: basic('root'),
        }),
        body: envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'exit 4'], envs: {} }, stdin: false }),
      });
      const { messages } = readEnvelopes(Buffer.from(await res.arrayBuffer()));
      expect(messages[messages.length - 1].event).toEqual({ end: { exitCode: 4, exited: true, status: 'exit status 4', error: 'exit status 4' } });
    });

    it('files.write(path, bytes, user="root", gzip=False, use_octet_stream=True): POST /files as application/octet-stream', async () => {
      const data = randomBytes(300_000);
      const res = await fetch(`${server.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent('/tmp/harness-cli.tgz')}&username=root`, {
        method: 'POST',
        headers: envdHeaders({ 'content-type': 'application/octet-stream' }),
        body: data,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual([{ name: 'harness-cli.tgz', type: 'file', path: '/tmp/harness-cli.tgz' }]);
      const back = await fetch(`${server.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent('/tmp/harness-cli.tgz')}&username=root`, {
        headers: envdHeaders(),
      });
      expect(Buffer.from(await back.arrayBuffer()).equals(data)).toBe(true);
    });

    it('files.write(path, str, user="agent"): POST /files as multipart/form-data (httpx), the part named file, its filename the path', async () => {
      const boundary = randomBytes(16).toString('hex');
      const body = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="/workspace/PROBLEM_STATEMENT.md"\r\nContent-Type: application/octet-stream\r\n\r\n` +
          `# the issue\nfix it\r\n--${boundary}--\r\n`,
      );
      const res = await fetch(`${server.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent('/workspace/PROBLEM_STATEMENT.md')}&username=root`, {
        method: 'POST',
        headers: envdHeaders({ 'content-type': `multipart/form-data; boundary=${boundary}` }),
        body,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual([{ name: 'PROBLEM_STATEMENT.md', type: 'file', path: '/workspace/PROBLEM_STATEMENT.md' }]);
    });

    it('files.read(path, user="root"): GET /files, the text', async () => {
      const res = await fetch(`${server.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent('/workspace/PROBLEM_STATEMENT.md')}&username=root`, {
        headers: envdHeaders(),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-length')).toBe(String('# the issue\nfix it'.length));
      expect(await res.text()).toBe('# the issue\nfix it');
      const missing = await fetch(`${server.env.E2B_SANDBOX_URL}/files?path=/nowhere/x&username=root`, { headers: envdHeaders() });
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ code: 404, message: expect.any(String) });
    });

    it('the health probe the SDK sends when a connection drops: GET /health', async () => {
      expect((await fetch(`${server.env.E2B_SANDBOX_URL}/health`, { headers: envdHeaders() })).status).toBe(204);
    });

    it('kill(): DELETE /sandboxes/{id}, 204; then 404, and envd answers 502 (not running)', async () => {
      const del = () =>
        fetch(`${server.env.E2B_API_URL}/sandboxes/${sandboxId}`, { method: 'DELETE', headers: { 'x-api-key': server.token, 'user-agent': PY_UA } });
      expect((await del()).status).toBe(204);
      const again = await del();
      expect(again.status).toBe(404);
      expect(await again.json()).toMatchObject({ code: 404 });
      expect((await fetch(`${server.env.E2B_SANDBOX_URL}/health`, { headers: envdHeaders() })).status).toBe(502);
    });
  });
});
