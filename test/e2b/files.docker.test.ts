/**
 * envd's file upload (`POST /files`) on its two paths, with the real SDK and with raw requests:
 * a body of known length (Content-Length: a one-file tar through the engine's archive API) and
 * one of unknown length (chunked, gzip, multipart: what the JS SDK always sends; streamed into an
 * exec of the toolbox, put in place only once it all came). Each larger than the read-ahead
 * (E2B.files.readAheadBytes), written as the user named (owner, 644; an existing file keeping its
 * own), and an upload that breaks half-way leaves the file as it was, with nothing left behind.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { expect, it } from 'vitest';
import { Sandbox } from 'e2b';
import { E2B } from '../../src/defaults.js';
import { describeDocker, waitFor } from '../support/docker.js';
import { e2bSuiteServer, TEMPLATE } from './helpers.js';

const SIZE = E2B.files.readAheadBytes * 2 + 12_345;

function sha(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

function arrayBufferOf(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer;
}

describeDocker('E2B file uploads: known and unknown length, as the user named, nothing lost when one breaks', () => {
  const server = e2bSuiteServer(['--max-concurrent-envs', '2']);

  /** envd's headers for raw requests to the sandbox */
  async function envdHeaders(sb: Sandbox): Promise<Record<string, string>> {
    const res = await fetch(`${server.url}/e2b/sandboxes/${sb.sandboxId}`, { headers: { 'x-api-key': server.token } });
    const { envdAccessToken } = (await res.json()) as { envdAccessToken: string };
    return { 'e2b-sandbox-id': sb.sandboxId, 'x-access-token': envdAccessToken };
  }

  async function shell(sb: Sandbox, cmd: string): Promise<string> {
    return (await sb.commands.run(cmd, { user: 'root' })).stdout;
  }

  it('writes files larger than the read-ahead through the SDK (octet-stream and multipart, both chunked) and a plain POST of known length, owned by the user', async () => {
    const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    try {
      await shell(sb, 'useradd -m agent');
      const bytes = randomBytes(SIZE);
      const digest = sha(bytes);
      // the JS SDK sends both chunked (no Content-Length): the streamed path
      await sb.files.write('/home/agent/octet/a.bin', arrayBufferOf(bytes), { user: 'agent', useOctetStream: true });
      await sb.files.write('/home/agent/multi/b.bin', arrayBufferOf(bytes), { user: 'agent' });
      // a plain request of known length: the archive path
      const headers = await envdHeaders(sb);
      const res = await fetch(`${server.url}/e2b/envd/files?path=known/c.bin&username=agent`, {
        method: 'POST',
        body: bytes,
        headers: { ...headers, 'content-type': 'application/octet-stream' },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual([{ name: 'c.bin', type: 'file', path: '/home/agent/known/c.bin' }]);
      for (const p of ['/home/agent/octet/a.bin', '/home/agent/multi/b.bin', '/home/agent/known/c.bin']) {
        // the file and the folder made for it are the user's
        expect(await shell(sb, `sha256sum ${p} | cut -d' ' -f1; stat -c '%U %G %a %s' ${p}; stat -c %U $(dirname ${p})`)).toBe(
          `${digest}\nagent agent 644 ${SIZE}\nagent\n`,
        );
        expect(sha(await sb.files.read(p, { format: 'bytes', user: 'agent' }))).toBe(digest);
      }
      // an existing file keeps its mode and owner on the streamed path too; nothing is left beside it
      await shell(sb, 'echo old > /srv/kept && chmod 640 /srv/kept && chown agent:root /srv/kept');
      await sb.files.write('/srv/kept', 'new\n', { user: 'root' });
      expect(await shell(sb, "cat /srv/kept; stat -c '%a %U %G' /srv/kept; ls -A /srv")).toBe('new\n640 agent root\nkept\n');
      // gzip of unknown length is undone on the way in
      const gz = await fetch(`${server.url}/e2b/envd/files?path=/srv/gz.bin&username=root`, {
        method: 'POST',
        body: gzipSync(bytes),
        headers: { ...headers, 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' },
      });
      expect(gz.status).toBe(200);
      expect((await shell(sb, 'sha256sum /srv/gz.bin')).split(' ')[0]).toBe(digest);
      // a folder where the file would go: envd's 400, from the streamed path's script
      const folder = await sb.files.write('/srv', 'x', { user: 'root' }).catch((e: unknown) => e);
      expect(String(folder)).toMatch(/folder/);
      // also when the body is large: the script stops before reading it, and says why
      const large = await sb.files.write('/srv', arrayBufferOf(bytes), { user: 'root', useOctetStream: true }).catch((e: unknown) => e);
      expect(String(large)).toMatch(/folder/);
      expect(await shell(sb, 'ls -A /srv')).toBe('gz.bin\nkept\n');
    } finally {
      await sb.kill();
    }
  });

  it('an upload that breaks half-way (the connection dropped, a multipart body cut short, a corrupt gzip) leaves the file as it was, and nothing beside it', async () => {
    const sb = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 });
    try {
      await shell(sb, 'mkdir /data && echo precious > /data/f && chmod 600 /data/f');
      const headers = await envdHeaders(sb);
      const url = new URL(`${server.url}/e2b/envd/files?path=/data/f&username=root`);

      // chunked, several MB sent, then the connection dropped
      await new Promise<void>((resolve) => {
        const req = request(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' } });
        req.on('error', () => resolve());
        req.on('response', (res) => {
          res.resume();
          resolve();
        });
        const chunk = randomBytes(1024 * 1024);
        let n = 0;
        const more = () => {
          while (n < 12) {
            n++;
            if (!req.write(chunk)) return void req.once('drain', more);
          }
          setTimeout(() => req.destroy(), 300);
        };
        more();
      });

      // a multipart body without its closing boundary
      const boundary = 'cut-short-boundary';
      const cut = Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="/data/f"\r\nContent-Type: application/octet-stream\r\n\r\n`),
        randomBytes(3 * 1024 * 1024),
      ]);
      const multipart = await fetch(url, {
        method: 'POST',
        body: new ReadableStream({
          start(c) {
            c.enqueue(cut);
            c.close();
          },
        }),
        duplex: 'half',
        headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` },
      } as RequestInit);
      expect(multipart.status).toBe(400);
      expect(((await multipart.json()) as { message: string }).message).toMatch(/closing boundary|did not arrive whole/);

      // gzip that is not
      const gz = await fetch(url, {
        method: 'POST',
        body: Buffer.concat([gzipSync(randomBytes(1024 * 1024)).subarray(0, 500_000), randomBytes(1000)]),
        headers: { ...headers, 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' },
      });
      expect(gz.status).toBe(400);

      // the file is as it was; the temporary files went with their uploads
      await waitFor(async () => (await shell(sb, 'ls -A /data')) === 'f\n', 10_000, 'the temporary files removed');
      expect(await shell(sb, "cat /data/f; stat -c '%a %U' /data/f")).toBe('precious\n600 root\n');
      // and the sandbox takes the next upload
      await sb.files.write('/data/f', 'after\n', { user: 'root' });
      expect(await shell(sb, 'cat /data/f')).toBe('after\n');
    } finally {
      await sb.kill();
    }
  });
});
