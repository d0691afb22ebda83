/**
 * The E2B side's parts that need no engine: the control line cut out of a command's output
 * wherever the stream splits it, the streaming multipart reader, the toolbox's entry lines, the
 * Connect framing and headers, image patterns, proto3 JSON names.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { basicUser, callTimeoutMs, envelope, parseEnvelope, refusedContentType } from '../../src/e2b/connect-rpc.js';
import { parseEntries, permissionsOf } from '../../src/e2b/filesystem.js';
import { boundaryOf, eachPart } from '../../src/e2b/multipart.js';
import { TagScanner } from '../../src/e2b/tag-scanner.js';
import { imagePatternMatches } from '../../src/e2b/templates.js';
import { egressFor, type AllowedEntry } from '../../src/e2b/egress.js';
import { camelKeys } from '../../src/protocol/e2b.js';

/** `data` cut at `cuts` (sorted offsets) */
function split(data: Buffer, cuts: number[]): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const c of [...cuts, data.length]) {
    out.push(data.subarray(at, c));
    at = c;
  }
  return out;
}

describe('TagScanner', () => {
  it('passes every byte before the line, wherever the chunks split it, and reads the value', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(300)), (before, rawCuts) => {
        const line = Buffer.from('__OE_END 0123456789abcdef 137\n');
        const data = Buffer.concat([Buffer.from(before), line, Buffer.from('after the line')]);
        const cuts = [...new Set(rawCuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        const s = new TagScanner('__OE_END', '0123456789abcdef');
        const out = Buffer.concat([...split(data, cuts).map((c) => s.push(c)), s.flush()]);
        expect(out.equals(Buffer.from(before))).toBe(true);
        expect(s.value).toBe('137');
      }),
    );
  });

  it('a line of another nonce is output', () => {
    const s = new TagScanner('__OE_END', 'aaaa');
    const out = Buffer.concat([s.push(Buffer.from('x __OE_END bbbb 1\ny')), s.flush()]);
    expect(out.toString()).toBe('x __OE_END bbbb 1\ny');
    expect(s.value).toBeNull();
  });
});

describe('multipart', () => {
  const body = (boundary: string, parts: { name: string; filename: string; data: Buffer }[]) =>
    Buffer.concat([
      Buffer.from('preamble\r\n'),
      ...parts.flatMap((p) => [
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"; filename="${p.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
        ),
        p.data,
        Buffer.from('\r\n'),
      ]),
      Buffer.from(`--${boundary}--\r\n`),
    ]);

  it('hands each part on whole, wherever the chunks split the body', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 1, maxLength: 4 }), fc.array(fc.nat(2000)), async (datas, rawCuts) => {
        const boundary = 'b0undary-xyz';
        const parts = datas.map((d, i) => ({ name: 'file', filename: `/tmp/f${i}`, data: Buffer.from(d) }));
        const whole = body(boundary, parts);
        const cuts = [...new Set(rawCuts.map((c) => c % (whole.length + 1)))].sort((a, b) => a - b);
        const got: { filename: string | null; data: Buffer }[] = [];
        const n = await eachPart(Readable.from(split(whole, cuts)), boundary, async (p) => {
          const chunks: Buffer[] = [];
          for await (const c of p.body) chunks.push(c as Buffer);
          got.push({ filename: p.filename, data: Buffer.concat(chunks) });
        });
        expect(n).toBe(parts.length);
        expect(got).toEqual(parts.map((p) => ({ filename: p.filename, data: p.data })));
      }),
    );
  });

  it('refuses a body without its closing boundary', async () => {
    await expect(
      eachPart(Readable.from([Buffer.from('--b\r\nContent-Disposition: form-data; name="file"\r\n\r\nabc')]), 'b', async (p) => void p.body.resume()),
    ).rejects.toThrow(/closing boundary/);
  });

  it('reads the boundary of a content type, quoted or not', () => {
    expect(boundaryOf('multipart/form-data; boundary=abc123')).toBe('abc123');
    expect(boundaryOf('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(boundaryOf('multipart/form-data')).toBeNull();
  });
});

describe("the toolbox's entry lines", () => {
  it('reads names of any bytes (a newline, spaces, a colon) by their length, and the type and permissions from the mode', () => {
    const name = '/tmp/a b\n:c';
    const out = Buffer.concat([
      Buffer.from(`E 81a4 12 root root 1700000000 ${Buffer.byteLength(name)}:${name}0:\n`),
      Buffer.from('E 41ed 4096 agent agent 1700000001 4:/tmp0:\n'),
      Buffer.from('E a1ff 7 root root 1700000002 6:/t/lnk6:/etc/x\n'),
      Buffer.from('E 11a4 0 root root 1700000003 6:/t/fif0:\n'),
    ]);
    const { entries, more } = parseEntries(out);
    expect(more).toBe(false);
    expect(entries.map((e) => [e.name, e.path, e.type, e.size, e.permissions, e.mode, e.owner])).toEqual([
      ['a b\n:c', name, 'FILE_TYPE_FILE', '12', '-rw-r--r--', 0o644, 'root'],
      ['tmp', '/tmp', 'FILE_TYPE_DIRECTORY', '4096', 'drwxr-xr-x', 0o755, 'agent'],
      ['lnk', '/t/lnk', 'FILE_TYPE_SYMLINK', '7', 'Lrwxrwxrwx', 0o777, 'root'],
    ]);
    expect(entries[2]!.symlinkTarget).toBe('/etc/x');
    expect(entries[0]!.modifiedTime).toBe('2023-11-14T22:13:20.000Z');
    expect(permissionsOf(0o100600)).toBe('-rw-------');
  });

  it('says when a listing was cut at its bound', () => {
    expect(parseEntries(Buffer.from('E 81a4 1 r r 1 2:/a0:\nMORE\n')).more).toBe(true);
  });
});

describe('Connect', () => {
  it('frames a message and reads it back', () => {
    expect(parseEnvelope(envelope({ a: [1, 'x'] }))).toEqual({ a: [1, 'x'] });
    expect(envelope({}, true)[0]).toBe(2);
  });

  it('refuses compressed and misframed envelopes, binary protobuf and other content types, saying what to send', () => {
    const compressed = envelope({});
    compressed[0] = 1;
    expect(() => parseEnvelope(compressed)).toThrow(/uncompressed/);
    expect(() => parseEnvelope(Buffer.concat([envelope({}), Buffer.from('x')]))).toThrow(/announces/);
    expect(refusedContentType('application/proto', false)?.code).toBe('unimplemented');
    expect(refusedContentType('text/plain', true)?.message).toMatch(/application\/connect\+json/);
    expect(refusedContentType('application/json; charset=utf-8', false)).toBeNull();
  });

  it("reads envd's user (Basic user:) and the call's timeout", () => {
    expect(basicUser(`Basic ${Buffer.from('root:').toString('base64')}`)).toBe('root');
    expect(basicUser(`Basic ${Buffer.from(':').toString('base64')}`)).toBeNull();
    expect(basicUser('Bearer x')).toBeNull();
    expect(callTimeoutMs('120000')).toBe(120_000);
    expect(callTimeoutMs('0')).toBeNull();
    expect(callTimeoutMs('soon')).toBeNull();
  });
});

describe('names', () => {
  it('image patterns: * any characters, ? one, the rest literal', () => {
    expect(imagePatternMatches('docker.io/swebench/*', 'docker.io/swebench/sweb.eval.x86_64.django:latest')).toBe(true);
    expect(imagePatternMatches('openenv-local/debian:*', 'openenv-local/debian:bookworm')).toBe(true);
    expect(imagePatternMatches('openenv-local/debian:*', 'openenv-local/debian-evil:bookworm')).toBe(false);
    expect(imagePatternMatches('a.b', 'aXb')).toBe(false);
    expect(imagePatternMatches('img:v?', 'img:v1')).toBe(true);
  });

  it("proto3 JSON's snake_case names become the lowerCamelCase ones", () => {
    expect(camelKeys({ include_entry: true, process: { pid: 3 }, list: [{ exit_code: 1 }] })).toEqual({
      includeEntry: true,
      process: { pid: 3 },
      list: [{ exitCode: 1 }],
    });
  });
});

describe("a sandbox's egress within the operator's list", () => {
  const allow: AllowedEntry[] = [
    { host: 'head.train', port: 18001, ips: ['10.0.0.5'] },
    { host: 'api.example.com', port: 443, ips: ['93.184.216.34', '93.184.216.35'] },
  ];
  const dests = (s: Parameters<typeof egressFor>[1]) => egressFor(allow, s).map((d) => `${d.ip}:${d.port}`);

  it("allows the whole list by default, nothing with allow_internet_access false, as E2B's defaults", () => {
    expect(dests({ allowInternetAccess: null, network: null })).toEqual(['10.0.0.5:18001', '93.184.216.34:443', '93.184.216.35:443']);
    expect(dests({ allowInternetAccess: true, network: null })).toHaveLength(3);
    expect(dests({ allowInternetAccess: false, network: null })).toEqual([]);
  });

  it('denyOut takes addresses and CIDRs away; allowOut (addresses, CIDRs, names, *.names) gives them back, and wins', () => {
    expect(dests({ allowInternetAccess: null, network: { denyOut: ['93.184.216.0/24'] } })).toEqual(['10.0.0.5:18001']);
    expect(dests({ allowInternetAccess: null, network: { denyOut: ['0.0.0.0/0'], allowOut: ['10.0.0.5'] } })).toEqual(['10.0.0.5:18001']);
    expect(dests({ allowInternetAccess: null, network: { denyOut: ['0.0.0.0/0'], allowOut: ['*.example.com'] } })).toEqual([
      '93.184.216.34:443',
      '93.184.216.35:443',
    ]);
    expect(dests({ allowInternetAccess: false, network: { allowOut: ['head.train'] } })).toEqual(['10.0.0.5:18001']);
    expect(dests({ allowInternetAccess: null, network: { denyOut: ['0.0.0.0/0'], allowOut: ['10.0.0.0/8'] } })).toEqual(['10.0.0.5:18001']);
  });

  it('never reaches past the list, whatever the sandbox asks', () => {
    expect(dests({ allowInternetAccess: true, network: { allowOut: ['1.1.1.1', '0.0.0.0/0', 'evil.example.org'] } })).toHaveLength(3);
    expect(egressFor([], { allowInternetAccess: true, network: { allowOut: ['1.1.1.1'] } })).toEqual([]);
  });

  it('refuses what E2B refuses: a host name to deny, an entry that is no address, CIDR or name', () => {
    expect(() => dests({ allowInternetAccess: null, network: { denyOut: ['example.com'] } })).toThrow(/denies no host names/);
    expect(() => dests({ allowInternetAccess: null, network: { denyOut: ['10.0.0.0/33'] } })).toThrow(/prefix is 0 to 32/);
    expect(() => egressFor([], { allowInternetAccess: null, network: { allowOut: ['not a host!'] } })).toThrow(/no address, CIDR or host name/);
  });
});
