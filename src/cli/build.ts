/** `openenv-bundle build BUNDLE [--push REGISTRY]`: every image a bundle needs, made ahead of time (docs/images.md). */
import { writeFile } from 'node:fs/promises';
import Dockerode from 'dockerode';
import { z } from 'zod';
import { prebuildImages, type PrebuildReport, type PrebuiltImage } from '../authoring/prebuild.js';
import { bundleImages } from '../bundle/env-images.js';
import { loadBundle } from '../bundle/loader.js';
import { buildArgRecord, SERVER_OPTIONS } from '../config.js';
import { engineMessage } from '../sandbox/docker/index.js';
import { defineCommand, EXIT, stopOnInterrupt } from './command.js';
import { exitWith } from './process-entry.js';
import { progressBar } from './progress.js';
import { jsonLine, visible } from './terminal-text.js';

const STATE_WORDS: Record<PrebuiltImage['state'], string> = { built: 'built', present: 'already present', pulled: 'pulled', failed: 'failed' };

/** one image's line (and, when it failed, its error and the build's last lines) */
export function imageLine(image: PrebuiltImage, done: number, total: number): string {
  const head = `  [${done}/${total}] ${image.name.includes('/') ? 'sidecar' : 'env'} ${image.name}: ${STATE_WORDS[image.state]}`;
  if (image.state === 'failed') {
    return [`${head} after ${image.seconds.toFixed(1)} s: ${image.error}`, ...image.tail.map((l) => `      | ${l}`)].join('\n');
  }
  const took = image.state === 'present' ? '' : ` in ${image.seconds.toFixed(1)} s`;
  return `${head} ${image.ref}${took}${image.pushed ? `\n      pushed ${image.pushed}` : ''}`;
}

/** the summary, then what a server does next with the images */
export function buildSummary(r: PrebuildReport, written: string | null): string {
  const c = r.counts;
  const lines = [`${r.images.length} image(s): ${c.built} built, ${c.present} already present, ${c.pulled} pulled, ${c.failed} failed`];
  const args = Object.entries(r.buildArgs).map(([k, v]) => ` --build-arg ${k}=${v}`);
  if (c.failed === 0 && r.images.length > 0) {
    if (r.registry) {
      const pushed = r.images.filter((i) => i.pushed).length;
      lines.push(
        `pushed ${pushed} image(s) to ${r.registry}. next (docs/images.md):`,
        `  on a swarm: build on the manager's engine, then serve --sandbox swarm --registry ${r.registry}${args.join('')}: it finds every tag and builds nothing`,
        `  on another engine: pull each by digest and tag it as the server looks for it (${written ? `the "pull" commands of each image in ${written}` : 'the commands --write FILE lists'}), then serve${args.join('')}`,
      );
    } else {
      lines.push(`next: serve the bundle on this engine${args.join('')}: it finds every image and builds nothing (docs/images.md)`);
    }
  }
  if (written) lines.push(`report written to ${written}`);
  return lines.join('\n');
}

export const buildCommand = defineCommand({
  name: 'build',
  summary: 'build every image a bundle needs ahead of time, optionally pushing them to a registry',
  synopsis: 'BUNDLE [options]',
  about: [
    'Makes every image a bundle needs on the Docker engine (DOCKER_HOST, else the local one), as the',
    'server would at its start: each env image (and sidecar image) built from its context by the',
    "server's own builder, under the same content-hash tag, so a server on that engine with the same",
    '--build-arg finds it and builds nothing; an image the bundle names is pulled when the engine',
    'lacks it. --concurrency at once; each image says built, already present, pulled or failed (with',
    "the error and the build's last lines), one failure stopping none of the others. --push tags each",
    'built image REGISTRY/<repo>:<tag> and pushes it, for a swarm whose nodes pull from REGISTRY or',
    'for other engines to pull; --write FILE keeps the report, with the pull commands per image.',
  ],
  positionals: { bundle: { name: 'BUNDLE', schema: z.string().min(1), help: 'the bundle folder or .tar.gz' } },
  options: {
    push: { ...SERVER_OPTIONS.registry, value: 'REGISTRY', help: 'HOST:PORT[/PATH] of a registry to push every built image to' },
    concurrency: { ...SERVER_OPTIONS.imageBuildConcurrency, help: 'images built (or pulled) at once' },
    buildArg: {
      ...SERVER_OPTIONS.buildArg,
      help: 'build argument for the env images (repeatable; part of each tag: serve with the same), e.g. NODE_IMAGE=openenv-local/node:20 offline',
      env: ['OPENENV_BUILD_ARG'],
    },
    write: { schema: z.string().min(1).optional(), value: 'FILE', help: 'write the report (every image, its tag, what was pushed, the pull commands) as JSON' },
    json: { schema: z.boolean().default(false), help: 'print the report as one JSON object on stdout' },
  },
  footer: ['Exit codes: 0 every image ready (and pushed), 1 the bundle does not load or an image failed, 2 a command line to fix.'],
  async run(args, io) {
    const bundle = await loadBundle(args.bundle);
    const docker = new Dockerode();
    // Ctrl-C: the builds running are cancelled on the engine; a second one leaves at once
    const stop = stopOnInterrupt(io, (second) => {
      if (second) exitWith(130);
    });
    const bar = progressBar(args.json ? { isTTY: false, write: () => undefined } : io.stderr);
    const running = new Set<string>();
    try {
      await docker.ping().catch((err: unknown) => {
        throw new Error(`no Docker engine answers (${engineMessage(err)}): start one, or point DOCKER_HOST at it`);
      });
      const count = bundleImages(bundle).length;
      if (!args.json) io.stdout.write(`${visible(`build ${bundle.manifest.name}: ${count} image(s), ${Math.min(count, args.concurrency)} at once`)}\n`);
      const report = await prebuildImages(bundle, {
        docker,
        buildArgs: buildArgRecord(args.buildArg),
        concurrency: args.concurrency,
        registry: args.push ?? null,
        signal: stop.signal,
        onStart: (name, done, total) => {
          running.add(name);
          bar.update(done, total, `making ${[...running].join(', ')}`);
        },
        onDone: (image, done, total) => {
          running.delete(image.name);
          bar.end();
          if (!args.json) io.stdout.write(`${visible(imageLine(image, done, total))}\n`);
          if (running.size) bar.update(done, total, `making ${[...running].join(', ')}`);
        },
      });
      if (args.write) await writeFile(args.write, `${JSON.stringify(report, null, 2)}\n`);
      io.stdout.write(`${args.json ? jsonLine(report) : visible(buildSummary(report, args.write ?? null))}\n`);
      return report.counts.failed === 0 ? EXIT.ok : EXIT.problems;
    } finally {
      bar.end();
      stop.dispose();
      await bundle.cleanup();
    }
  },
});
