/** The engine-free parts of the Docker sandbox: subnet arithmetic, log demultiplexing, build output, context hashing. */
import { mkdtemp, mkdir, rm, symlink, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { demuxLog, lastLines } from '../../../src/sandbox/engine/logs.js';
import { contextDigest, followBuildOutput, imageTag, listContext } from '../../../src/sandbox/engine/image-build.js';
import { ownContainerIdCandidates } from '../../../src/sandbox/engine/own-container.js';
import { SubnetPool } from '../../../src/sandbox/docker/subnet-pool.js';

describe('SubnetPool', () => {
  it('carves /28s out of the pool, each with its gateway', () => {
    const pool = new SubnetPool({ pool: '10.213.0.0/16', prefix: 28 });
    expect(pool.capacity).toBe(4096);
    expect(pool.acquire('a')).toEqual({ index: 0, cidr: '10.213.0.0/28', gateway: '10.213.0.1' });
    expect(pool.acquire('b')).toEqual({ index: 1, cidr: '10.213.0.16/28', gateway: '10.213.0.17' });
    expect(pool.subnet(4095)).toEqual({ index: 4095, cidr: '10.213.255.240/28', gateway: '10.213.255.241' });
    expect(pool.inUse).toBe(2);
  });

  it('skips a subnet another network uses, for a while, then tries it again', () => {
    let now = 0;
    const pool = new SubnetPool({ pool: '10.0.0.0/29', prefix: 29, foreignTtlMs: 1000, now: () => now });
    expect(pool.capacity).toBe(1);
    pool.acquire('a');
    pool.markForeign('a');
    expect(pool.inUse).toBe(0);
    expect(() => pool.acquire('b')).toThrow(SandboxError);
    now = 1001;
    expect(pool.acquire('b').cidr).toBe('10.0.0.0/29');
  });

  it('hands out released subnets again only after the others (round robin), and never one still held', () => {
    const pool = new SubnetPool({ pool: '192.168.0.0/26', prefix: 28 });
    const got = ['a', 'b', 'c', 'd'].map((o) => pool.acquire(o).index);
    expect(got).toEqual([0, 1, 2, 3]);
    expect(() => pool.acquire('e')).toThrow(/no free subnet/);
    pool.release('b');
    expect(pool.acquire('e').index).toBe(1);
    pool.release('a');
    pool.release('c');
    expect(pool.acquire('f').index).toBe(2);
    expect(pool.acquire('g').index).toBe(0);
    expect(pool.holds('d')).toBe(true);
    expect(pool.inUse).toBe(4);
  });

  it('refuses a second subnet for one owner and bad configurations', () => {
    const pool = new SubnetPool({ pool: '10.213.0.0/16', prefix: 28 });
    pool.acquire('a');
    expect(() => pool.acquire('a')).toThrow(/already holds/);
    expect(() => new SubnetPool({ pool: '10.213.0.1/16', prefix: 28 })).toThrow(/not aligned/);
    expect(() => new SubnetPool({ pool: '10.213.0.0/16', prefix: 30 })).toThrow(/prefix/);
    expect(() => new SubnetPool({ pool: '10.213.0.0/24', prefix: 20 })).toThrow(/prefix/);
    expect(() => new SubnetPool({ pool: 'fd00::/64', prefix: 28 })).toThrow(/IPv4 CIDR/);
  });
});

describe('container logs', () => {
  const frame = (stream: 1 | 2, text: string) => {
    const payload = Buffer.from(text);
    const header = Buffer.alloc(8);
    header[0] = stream;
    header.writeUInt32BE(payload.length, 4);
    return Buffer.concat([header, payload]);
  };

  it('demultiplexes stdout and stderr frames in order', () => {
    const buf = Buffer.concat([frame(1, 'out one\n'), frame(2, 'err two\n'), frame(1, 'out three\n')]);
    expect(demuxLog(buf)).toBe('out one\nerr two\nout three\n');
  });

  it('takes a raw (TTY) log as it is', () => {
    expect(demuxLog(Buffer.from('plain text\nmore\n'))).toBe('plain text\nmore\n');
  });

  it('keeps the last n lines', () => {
    const text = Array.from({ length: 30 }, (_, i) => `line ${i}`).join('\n') + '\n';
    expect(lastLines(text, 3)).toBe('line 27\nline 28\nline 29');
  });
});

describe('build output', () => {
  it('passes every line on and reports an error line the stream itself does not fail on', async () => {
    const lines: string[] = [];
    const body = [
      '{"stream":"Step 1/2 : FROM x\\n"}\n{"stream":" ---> abc\\n"}',
      '\n{"stream":"Step 2/2 : RUN false\\n"}\n',
      '{"errorDetail":{"code":1,"message":"The command \'false\' returned a non-zero code: 1"},"error":"The command \'false\' returned a non-zero code: 1"}\n',
    ];
    const failure = await followBuildOutput(Readable.from(body), (l) => lines.push(l));
    expect(failure).toBe("The command 'false' returned a non-zero code: 1");
    expect(lines).toEqual(['Step 1/2 : FROM x', ' ---> abc', 'Step 2/2 : RUN false', "ERROR: The command 'false' returned a non-zero code: 1"]);
  });

  it('returns null for a clean build', async () => {
    expect(await followBuildOutput(Readable.from(['{"stream":"Successfully built abc\\n"}\n', '{"aux":{"ID":"sha256:abc"}}\n']), () => {})).toBeNull();
  });
});

describe('build context', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const req = () => ({ bundleName: 'b', envName: 'e', contextDir: dir, buildArgs: {} });

  it('hashes paths, modes, contents and build args', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ctx-'));
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\n');
    await mkdir(path.join(dir, 'src'));
    await writeFile(path.join(dir, 'src', 'a.txt'), 'a');
    const digest = async (args: Record<string, string> = {}) => contextDigest(await listContext(req()), args);
    const d0 = await digest();
    expect(d0).toMatch(/^[0-9a-f]{64}$/);
    expect(await digest()).toBe(d0);
    expect(await digest({ X: '1' })).not.toBe(d0);
    await chmod(path.join(dir, 'src', 'a.txt'), 0o755);
    const d1 = await digest();
    expect(d1).not.toBe(d0);
    await writeFile(path.join(dir, 'src', 'a.txt'), 'b');
    const d2 = await digest();
    expect(d2).not.toBe(d1);
    await writeFile(path.join(dir, 'src', 'b.txt'), '');
    expect(await digest()).not.toBe(d2);
    expect(imageTag('Fixture V1', 'echo', d0)).toBe(`openenv-bundle/fixture-v1-echo:${d0.slice(0, 12)}`);
  });

  it('honours .dockerignore: excluded paths are neither sent nor hashed; Dockerfile and exceptions stay', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ctx-'));
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\n');
    await writeFile(path.join(dir, '.dockerignore'), 'node_modules\n*.log\n!keep.log\nDockerfile\n');
    await mkdir(path.join(dir, 'node_modules', 'pkg'), { recursive: true });
    await writeFile(path.join(dir, 'node_modules', 'pkg', 'index.js'), 'x');
    // a link out of the context inside an ignored folder is never looked at
    await symlink('../../../../etc/passwd', path.join(dir, 'node_modules', 'pkg', 'escape'));
    await writeFile(path.join(dir, 'debug.log'), 'noise');
    await writeFile(path.join(dir, 'keep.log'), 'kept');
    await writeFile(path.join(dir, 'app.js'), 'app');
    const list = async () => (await listContext(req())).map((e) => e.rel);
    expect(await list()).toEqual(['.dockerignore', 'Dockerfile', 'app.js', 'keep.log']);
    const d0 = await contextDigest(await listContext(req()), {});
    await writeFile(path.join(dir, 'debug.log'), 'more noise');
    await writeFile(path.join(dir, 'node_modules', 'pkg', 'index.js'), 'y');
    expect(await contextDigest(await listContext(req()), {})).toBe(d0);
    await writeFile(path.join(dir, 'keep.log'), 'changed');
    expect(await contextDigest(await listContext(req()), {})).not.toBe(d0);
  });

  it('refuses a symlink that leaves the context, and a context without Dockerfile', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ctx-'));
    await expect(listContext(req())).rejects.toThrow(/no Dockerfile/);
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\n');
    await writeFile(path.join(dir, 'inside.txt'), 'x');
    await symlink('inside.txt', path.join(dir, 'ok-link'));
    expect((await listContext(req())).map((e) => `${e.type}:${e.rel}`)).toEqual(['file:Dockerfile', 'file:inside.txt', 'symlink:ok-link']);
    await symlink('../../etc/passwd', path.join(dir, 'escape'));
    const err = await listContext(req()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).reason).toBe('image_unavailable');
    expect((err as SandboxError).message).toMatch(/symlink escape points outside the build context/);
  });
});

describe('own container id', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('finds the id in mountinfo, then cgroup, then a short-id hostname', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'proc-'));
    const id = 'a'.repeat(64);
    const other = 'b'.repeat(64);
    await writeFile(path.join(dir, 'mountinfo'), `1 2 0:1 /var/lib/docker/containers/${id}/hostname /etc/hostname rw - ext4 /dev/x rw\n`);
    await writeFile(path.join(dir, 'cgroup'), `0::/docker/${other}\n`);
    const files = { mountinfo: path.join(dir, 'mountinfo'), cgroup: path.join(dir, 'cgroup') };
    expect(await ownContainerIdCandidates({ ...files, hostname: '0123456789ab' })).toEqual([id, other, '0123456789ab']);
    expect(await ownContainerIdCandidates({ mountinfo: '/nonexistent', cgroup: '/nonexistent', hostname: 'vm' })).toEqual([]);
  });

  it("on the engine's own host, does not take another container's files the engine mounted (copying into it) for its own", async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'proc-'));
    const other = 'c'.repeat(64);
    await writeFile(
      path.join(dir, 'mountinfo'),
      [
        `822 391 254:0 /var/lib/docker/containers/${other}/resolv.conf /var/lib/docker/overlay2/${'d'.repeat(64)}/merged/etc/resolv.conf rw,relatime - ext4 /dev/vda rw`,
        `580 42 0:165 / /var/lib/docker/containers/${other}/mounts/shm rw,nosuid - tmpfs shm rw,size=65536k`,
        '',
      ].join('\n'),
    );
    await writeFile(path.join(dir, 'cgroup'), '0::/\n');
    expect(await ownContainerIdCandidates({ mountinfo: path.join(dir, 'mountinfo'), cgroup: path.join(dir, 'cgroup'), hostname: 'vm' })).toEqual([]);
  });
});
