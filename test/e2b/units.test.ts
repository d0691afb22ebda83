/**
 * The E2B side's parts that need no engine: the control line cut out of a command's output
 * wherever the stream splits it, the streaming multipart reader, the toolbox's entry lines, the
 * Connect framing and headers, image patterns, proto3 JSON names, the file read out of the
 * engine's tar stream.
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
import * as tar from 'tar';
import { openDownload, writeFileStream } from '../../src/e2b/sandbox-files.js';
import { E2B } from '../../src/defaults.js';
import type { ContainerExec } from '../../src/sandbox/container-exec.js';

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

/** a tar stream of entries as the engine's getArchive sends them (a PAX header first where node-tar writes one) */
async function tarOf(entries: { path: string; type?: 'File' | 'Directory' | 'SymbolicLink'; data?: Buffer; linkpath?: string }[]): Promise<Buffer> {
  const out: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? 'File';
    const data = e.data ?? Buffer.alloc(0);
    const header: tar.HeaderData = {
      path: e.path,
      mode: 0o644,
      uid: 0,
      gid: 0,
      size: type === 'File' ? data.length : 0,
      mtime: new Date(0),
      type,
      linkpath: e.linkpath,
    };
    const block = Buffer.alloc(512);
    if (new tar.Header(header).encode(block)) out.push(new tar.Pax(header).encode());
    out.push(block);
    if (type === 'File') out.push(data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

/** an exec whose engine answers `archive` (cut at `cuts`) for any regular file */
function archiveExec(archive: Buffer, cuts: number[], gone: { destroyed: boolean }): ContainerExec {
  return {
    id: 'fake',
    toolbox: null,
    stat: async () => ({ name: 'f', size: 0, mode: 0o644, mtime: '', linkTarget: '' }),
    getArchive: async () => {
      const s = Readable.from(split(archive, cuts)) as Readable & { destroy(): Readable };
      s.once('close', () => (gone.destroyed = true));
      return s;
    },
  } as unknown as ContainerExec;
}

describe("a file read out of the engine's tar stream", () => {
  const read = async (d: { body: Readable }) => Buffer.concat(await d.body.toArray());

  it('gives the first file whole, its size first, wherever the chunks cut headers and bytes, then lets the stream go', async () => {
    const data = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    const longName = `${'deep/'.repeat(40)}file.bin`;
    for (const name of ['f.bin', longName]) {
      const archive = await tarOf([
        { path: name, data },
        { path: 'next', data: Buffer.from('not this') },
      ]);
      await fc.assert(
        fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: archive.length - 1 }), { maxLength: 12 }), async (cuts) => {
          const gone = { destroyed: false };
          const d = await openDownload(
            archiveExec(
              archive,
              cuts.sort((a, b) => a - b),
              gone,
            ),
            'root',
            '/f.bin',
          );
          expect(d.size).toBe(data.length);
          expect((await read(d)).equals(data)).toBe(true);
          expect(gone.destroyed).toBe(true);
        }),
        { numRuns: 40 },
      );
    }
  });

  it('an empty file, and a file the size of whole blocks', async () => {
    for (const data of [Buffer.alloc(0), Buffer.alloc(1024, 1)]) {
      const d = await openDownload(archiveExec(await tarOf([{ path: 'f', data }]), [100, 700], { destroyed: false }), 'root', '/f');
      expect(d.size).toBe(data.length);
      expect((await read(d)).equals(data)).toBe(true);
    }
  });

  it('refuses a folder or a link the engine archived, an empty archive, and bytes that are no tar stream', async () => {
    const refused = (archive: Buffer) => openDownload(archiveExec(archive, [], { destroyed: false }), 'root', '/f').catch((e: Error) => e);
    expect(String(await refused(await tarOf([{ path: 'd', type: 'Directory' }])))).toMatch(/is not a regular file/);
    expect(String(await refused(await tarOf([{ path: 'l', type: 'SymbolicLink', linkpath: 'x' }])))).toMatch(/is not a regular file/);
    expect(String(await refused(Buffer.alloc(1024)))).toMatch(/does not exist/);
    expect(String(await refused(Buffer.from('garbage'.repeat(100))))).toMatch(/not a tar stream/);
  });

  it('a stream that ends before the file does fails the body, not silently short', async () => {
    const archive = await tarOf([{ path: 'f', data: Buffer.alloc(10_000, 3) }]);
    const d = await openDownload(archiveExec(archive.subarray(0, 4096), [], { destroyed: false }), 'root', '/f');
    await expect(read(d)).rejects.toThrow(/ended \d+ bytes before the file's end/);
  });

  it('a reader that stops reading pauses the engine: what is held stays bounded', async () => {
    const data = Buffer.alloc(8 * 1024 * 1024, 5);
    const archive = await tarOf([{ path: 'f', data }]);
    let sent = 0;
    const chunks = split(
      archive,
      Array.from({ length: archive.length / 65536 - 1 }, (_, i) => (i + 1) * 65536),
    );
    const source = new Readable({
      read() {
        const c = chunks.shift();
        if (c) sent += c.length;
        this.push(c ?? null);
      },
    });
    const exec = { ...archiveExec(archive, [], { destroyed: false }), getArchive: async () => source } as unknown as ContainerExec;
    const d = await openDownload(exec, 'root', '/f');
    await new Promise((r) => setTimeout(r, 50));
    expect(sent, String(sent)).toBeLessThanOrEqual(E2B.files.readBufferBytes + 3 * 65536);
    expect((await read(d)).length).toBe(data.length);
  });
});

/** an exec where root's writes are settled by the engine alone: stat answers `files` (path → mode), putArchive keeps what it is given */
function engineOnlyExec(files: Record<string, { mode: number; uid?: number; gid?: number }>, opts: { slowStat?: Promise<void> } = {}) {
  const put: { dir: string; tar: Buffer }[] = [];
  const exec = {
    id: 'fake',
    toolbox: null,
    start: async () => {
      throw new Error('no exec: the engine settles where root writes');
    },
    stat: async (p: string) => {
      await opts.slowStat;
      const f = files[p];
      return f ? { name: p, size: 0, mode: f.mode, mtime: '', linkTarget: '' } : null;
    },
    getArchive: async (p: string) => {
      const f = files[p]!;
      const block = Buffer.alloc(512);
      new tar.Header({ path: 'x', mode: f.mode & 0o777, uid: f.uid ?? 0, gid: f.gid ?? 0, size: 3, type: 'File' }).encode(block);
      return Readable.from([block, Buffer.from('old'), Buffer.alloc(509 + 1024)]);
    },
    putArchive: async (dir: string, t: Buffer | NodeJS.ReadableStream) => {
      const chunks: Buffer[] = [];
      for await (const c of t as AsyncIterable<Buffer>) chunks.push(c);
      put.push({ dir, tar: Buffer.concat(chunks) });
    },
  } as unknown as ContainerExec;
  return { exec, put };
}

/** the one file of a tar: its header and bytes */
function unTar(t: Buffer): { header: tar.Header; data: Buffer } {
  let at = 0;
  let header = new tar.Header(t.subarray(0, 512));
  if (header.type === 'ExtendedHeader') {
    at = 512 + Math.ceil((header.size ?? 0) / 512) * 512;
    header = new tar.Header(t.subarray(at, at + 512));
  }
  return { header, data: t.subarray(at + 512, at + 512 + (header.size ?? 0)) };
}

describe("a file written through the engine's archive API", () => {
  const DIR = 2 ** 31 + 0o755;
  it("root's new file in a folder that exists: no exec, root's with mode 644, its bytes whole wherever the body's chunks fall", async () => {
    const data = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 253));
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: data.length - 1 }), { maxLength: 20 }), async (cuts) => {
        const { exec, put } = engineOnlyExec({ '/tmp': { mode: DIR } });
        const info = await writeFileStream(
          exec,
          'root',
          '/tmp/./new.bin',
          Readable.from(
            split(
              data,
              cuts.sort((a, b) => a - b),
            ),
          ),
          { size: data.length, gzip: false },
        );
        expect(info).toEqual({ name: 'new.bin', type: 'file', path: '/tmp/new.bin', bytes: data.length });
        expect(put).toHaveLength(1);
        expect(put[0]!.dir).toBe('/tmp');
        const { header, data: got } = unTar(put[0]!.tar);
        expect([header.path, header.uid, header.gid, header.mode]).toEqual(['new.bin', 0, 0, 0o644]);
        expect(got.equals(data)).toBe(true);
      }),
      { numRuns: 30 },
    );
  });

  it("a body of unknown length (chunked, or gzip) streams through the toolbox, never the archive API; a file that exists, a link, a missing folder, another user are the sandbox's to settle", async () => {
    const { exec, put } = engineOnlyExec({ '/home/agent': { mode: DIR }, '/home/agent/f': { mode: 0o600 }, '/l': { mode: 2 ** 27 + 0o777 } });
    const { gzipSync } = await import('node:zlib');
    for (const [body, gzip] of [
      [Buffer.from('new bytes'), false],
      [gzipSync('zipped'), true],
    ] as const) {
      const r = await writeFileStream(exec, 'root', '/home/agent/new', Readable.from([body]), { size: null, gzip }).catch((e: Error) => e);
      expect(String(r)).toMatch(/has no toolbox, which e2b-stream-write needs/);
    }
    expect(put).toEqual([]);
    // each of these asks the container (its toolbox's script, which this fake container lacks)
    for (const [user, p] of [
      ['root', '/home/agent/f'],
      ['root', '/l/x'],
      ['root', '/nowhere/x'],
      ['root', 'relative'],
      ['agent', '/home/agent/g'],
      [null, '/home/agent/g'],
    ] as const) {
      const r = await writeFileStream(exec, user, p, Readable.from([Buffer.from('x')]), { size: 1, gzip: false }).catch((e: Error) => e);
      expect(String(r), `${user} ${p}`).toMatch(/has no toolbox, which e2b-prepare-write needs/);
    }
  });

  it('a body that ends short of its length, or runs past it, is refused, not written short', async () => {
    const { exec } = engineOnlyExec({ '/tmp': { mode: DIR } });
    const short = writeFileStream(exec, 'root', '/tmp/s', Readable.from([Buffer.alloc(10)]), { size: 20, gzip: false });
    await expect(short).rejects.toThrow(/ended after 10 of the 20 bytes/);
    const long = writeFileStream(exec, 'root', '/tmp/l', Readable.from([Buffer.alloc(30)]), { size: 20, gzip: false });
    await expect(long).rejects.toThrow(/more than the 20 bytes/);
  });

  it('reads ahead at most E2B.files.readAheadBytes while it asks where the file goes', async () => {
    let release!: () => void;
    const slowStat = new Promise<void>((r) => (release = r));
    const { exec, put } = engineOnlyExec({ '/tmp': { mode: DIR } }, { slowStat });
    const size = 64 * 1024 * 1024;
    let pulled = 0;
    const body = new Readable({
      read() {
        if (pulled >= size) return void this.push(null);
        pulled += 65536;
        this.push(Buffer.alloc(65536, 1));
      },
    });
    const writing = writeFileStream(exec, 'root', '/tmp/big', body, { size, gzip: false });
    await new Promise((r) => setTimeout(r, 100));
    expect(pulled).toBeGreaterThanOrEqual(E2B.files.readAheadBytes);
    expect(pulled).toBeLessThan(E2B.files.readAheadBytes + 1024 * 1024);
    release();
    await writing;
    expect(unTar(put[0]!.tar).data.length).toBe(size);
  });
});

describe('which sandbox backends the E2B API serves', () => {
  const deps = (sandbox: Record<string, unknown>) =>
    ({
      bundle: { manifest: { envs: {} }, splits: {} },
      sandbox: { images: {}, ...sandbox },
      settings: { imageKey: null, imagePatterns: [], egressAllow: Promise.resolve([]), modelDoor: null },
      log: { child: () => ({}) },
    }) as never;

  it('refuses on a backend with exec access but no E2B sandboxes (the swarm backend), naming it', async () => {
    const { E2bSandboxes } = await import('../../src/e2b/sandboxes.js');
    expect(new E2bSandboxes(deps({ shell: {} })).unavailable).toMatch(/does not run E2B sandboxes \(--sandbox swarm: not yet\)/);
    expect(new E2bSandboxes(deps({})).unavailable).toMatch(/does not run E2B sandboxes/);
  });

  it('serves on the Docker backend', async () => {
    const { E2bSandboxes } = await import('../../src/e2b/sandboxes.js');
    expect(new E2bSandboxes(deps({ shell: {}, e2bSandboxes: true })).unavailable).toBeNull();
  });
});
