/**
 * An env image built without network (bundle.json's envs.<env>.build_network, docs/security.md
 * "Image builds and the network"), without Docker: the field as the loader takes it, the tag
 * (another image than the one built with the network; the old tags unchanged), what a Dockerfile
 * ADDs from elsewhere (the engine fetches it on the host's network whatever the build's network:
 * refused before anything reaches the engine), the hint a failed RUN gets, and the import's guess
 * at Dockerfiles that download.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type Dockerode from 'dockerode';
import { afterEach, describe, expect, it } from 'vitest';
import { downloadsIn } from '../../../src/authoring/harbor/dockerfile.js';
import { loadBundle } from '../../../src/bundle/index.js';
import { addedUrls, buildEnvImage, contextDigest, dockerfileInstructions, listContext, noNetworkHint } from '../../../src/sandbox/engine/image-build.js';
import { SandboxError } from '../../../src/sandbox/sandbox.js';
import { baseManifest, bundleError, removeTempDirs, writeBundle } from '../../bundle/helpers.js';

afterEach(removeTempDirs);

describe('build_network in bundle.json', () => {
  it('takes "none" and "default" on a build env; refuses another value, and the field on an image env', async () => {
    for (const value of ['none', 'default']) {
      const b = await loadBundle(writeBundle({ manifest: { ...baseManifest(), envs: { e: { build: 'envs/e', build_network: value } } } }));
      expect(b.manifest.envs.e!.build_network).toBe(value);
    }
    const host = await bundleError(loadBundle(writeBundle({ manifest: { ...baseManifest(), envs: { e: { build: 'envs/e', build_network: 'host' } } } })));
    expect(host.message).toContain('field "envs.e.build_network": expected a build network: "default" or "none"');
    const image = await bundleError(
      loadBundle(writeBundle({ manifest: { ...baseManifest(), envs: { e: { image: 'debian:bookworm', build_network: 'none' } } } })),
    );
    expect(image.message).toContain('field "envs.e.build_network": build_network is for envs with "build": an "image" env is not built here');
  });
});

describe('an image built without network', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const req = (network?: 'none') => ({ bundleName: 'b', envName: 'e', contextDir: dir, buildArgs: {}, ...(network ? { network } : {}) });

  it('is tagged apart from the one built with the network, whose tag is what it was', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ctx-'));
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\n');
    const entries = await listContext(req());
    const before = await contextDigest(entries, {});
    expect(await contextDigest(entries, {}, undefined)).toBe(before);
    expect(await contextDigest(entries, {}, 'none')).not.toBe(before);
  });

  it('refuses a Dockerfile that ADDs a URL before the engine is asked anything', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ctx-'));
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM scratch\nADD http://172.17.0.1:8200/secret /s\n');
    const untouchable = new Proxy({}, { get: () => expect.unreachable('the engine was asked') }) as unknown as Dockerode;
    const err = await buildEnvImage(untouchable, req('none'), new Map()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as Error).message).toContain(
      "its Dockerfile ADDs http://172.17.0.1:8200/secret: the engine fetches an ADD's URL itself, on the host's network, and this image builds without network",
    );
  });

  it('finds every ADD source that is a URL or a variable, as the engine reads instructions', () => {
    expect(addedUrls('FROM x\nADD https://a.example/f.tgz /app/\nADD local.tgz /app/\nCOPY http://not-an-add /x\n')).toEqual(['https://a.example/f.tgz']);
    expect(addedUrls('ADD --chown=1:1 --checksum=sha256:00 http://h/a git@github.com:o/r.git /dst/\n')).toEqual(['http://h/a', 'git@github.com:o/r.git']);
    expect(addedUrls('ADD ["http://h/exec", "/dst"]\n')).toEqual(['http://h/exec']);
    // a continuation, with a comment line and an empty line inside it
    expect(addedUrls('ADD \\\n# a comment\n\n  http://h/continued /dst\n')).toEqual(['http://h/continued']);
    // the escape directive's character continues lines instead of the backslash
    expect(addedUrls('# escape=`\nFROM x\nADD `\n  http://h/backtick /dst\n')).toEqual(['http://h/backtick']);
    expect(addedUrls('ARG U=http://h/arg\nADD ${U} /dst\nADD $U /dst\n')).toEqual(['${U}', '$U']);
    expect(dockerfileInstructions('# escape=`\nRUN a `\n  b\nRUN c \\\n')).toEqual(['RUN a b', 'RUN c \\']);
  });

  it('a failed RUN says the build had no network and what to change; other failures and builds with the network get no such hint', () => {
    const run = "The command '/bin/sh -c apt-get update' returned a non-zero code: 100";
    expect(noNetworkHint(run, { network: 'none', envName: 'box' })).toContain(
      'this image builds without network: bundle.json\'s envs.box.build_network is "none", so a RUN that downloads fails',
    );
    expect(noNetworkHint(run, { envName: 'box' })).toBe('');
    expect(noNetworkHint('pull access denied for nope', { network: 'none', envName: 'box' })).toBe('');
  });
});

describe("the import's guess at a Dockerfile that downloads", () => {
  it('names the downloading commands of RUN steps, and nothing for one that only copies and computes', () => {
    const ins = dockerfileInstructions(
      'FROM debian\nRUN apt-get update && \\\n    apt-get install -y jq\nRUN pip3 install numpy; git clone https://x/r\nRUN cd /go && echo curl-less\n',
    );
    expect(downloadsIn(ins)).toEqual(['apt-get', 'pip3', 'git clone']);
    expect(downloadsIn(dockerfileInstructions('FROM debian\nCOPY a /a\nRUN chmod +x /a && python3 /a/make_db.py\n'))).toEqual([]);
  });
});
