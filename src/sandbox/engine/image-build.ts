/**
 * Env images: tagged by a hash of their build context, so an unchanged context is never rebuilt
 * and a changed one always is. The context is streamed to the engine as a tar archive. A build
 * the bundle asks to have no network (`build_network: "none"`) gets none for its RUN steps, and
 * is refused when its Dockerfile ADDs a URL, which the engine would fetch on the host's network.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readdir, readFile, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import dockerignore from '@balena/dockerignore';
import type Dockerode from 'dockerode';
import * as tar from 'tar';
import { throwIfAborted } from '../../util/abort.js';
import { LOCAL_BASE_IMAGES } from '../../defaults.js';
import { LABELS, SandboxError, type ImageBuildRequest } from '../sandbox.js';
import { engineMessage, isNotFound, toSandboxError } from './errors.js';
import { forEachProgressLine, progressFailure, type ProgressLine } from './progress.js';

interface ContextEntry {
  /** posix path relative to the context */
  rel: string;
  abs: string;
  type: 'file' | 'dir' | 'symlink';
  mode: number;
  linkTarget?: string;
}

function buildFailure(req: ImageBuildRequest, what: string): SandboxError {
  return new SandboxError('no_image', `cannot build the image of env \`${req.envName}\` from ${req.contextDir}: ${what}`);
}

/**
 * The context's `.dockerignore`, with Docker's semantics: what it excludes is neither sent nor
 * hashed (so editing an ignored file rebuilds nothing), except the Dockerfile and the
 * .dockerignore itself, which the engine always needs. Null when there is none.
 */
async function ignoreRules(root: string): Promise<{ ignores: (rel: string) => boolean; hasExceptions: boolean } | null> {
  const text = await readFile(path.join(root, '.dockerignore'), 'utf8').catch(() => null);
  if (text === null) return null;
  // a CommonJS module: under NodeNext its typed default export is the module's own `default`
  const ig = dockerignore.default().add(text);
  const hasExceptions = text.split('\n').some((l) => l.trim().startsWith('!'));
  return { ignores: (rel) => rel !== 'Dockerfile' && rel !== '.dockerignore' && ig.ignores(rel), hasExceptions };
}

/** every entry of the context, sorted; refuses links that leave it and anything but files, dirs and links */
export async function listContext(req: ImageBuildRequest): Promise<ContextEntry[]> {
  const root = await realpath(req.contextDir).catch(() => {
    throw buildFailure(req, 'the folder does not exist');
  });
  const rules = await ignoreRules(root);
  const entries: ContextEntry[] = [];
  const walk = async (absDir: string, relDir: string): Promise<void> => {
    const names = (await readdir(absDir)).sort();
    for (const name of names) {
      const abs = path.join(absDir, name);
      const rel = relDir ? `${relDir}/${name}` : name;
      const st = await lstat(abs);
      if (rules?.ignores(rel)) {
        // an excluded folder is skipped whole unless a "!" rule may bring back something in it
        if (st.isDirectory() && rules.hasExceptions) await walk(abs, rel);
        continue;
      }
      const mode = st.mode & 0o7777;
      if (st.isSymbolicLink()) {
        const target = await readlink(abs);
        const resolved = await realpath(abs).catch(() => null);
        const inside = resolved !== null && (resolved === root || resolved.startsWith(root + path.sep));
        if (!inside || path.isAbsolute(target)) {
          throw buildFailure(req, `symlink ${rel} points outside the build context or nowhere (${target})`);
        }
        entries.push({ rel, abs, type: 'symlink', mode, linkTarget: target });
      } else if (st.isDirectory()) {
        entries.push({ rel, abs, type: 'dir', mode });
        await walk(abs, rel);
      } else if (st.isFile()) {
        entries.push({ rel, abs, type: 'file', mode });
      } else {
        throw buildFailure(req, `${rel} is neither a file, a folder nor a symlink`);
      }
    }
  };
  await walk(root, '');
  if (!entries.some((e) => e.rel === 'Dockerfile' && e.type === 'file')) throw buildFailure(req, 'it has no Dockerfile');
  return entries.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

/**
 * sha256 over sorted paths, types, modes, contents (or link targets), the build args, and the
 * build's network when it has none (an image built without network is another image; the tags of
 * builds with the engine's network are what they were before the choice existed)
 */
export async function contextDigest(entries: ContextEntry[], buildArgs: Record<string, string>, network?: 'none'): Promise<string> {
  const h = createHash('sha256');
  for (const e of entries) {
    h.update(`${e.type}\0${e.rel}\0${e.mode.toString(8)}\0`);
    if (e.type === 'symlink') h.update(`${e.linkTarget}\0`);
    if (e.type === 'file') {
      for await (const chunk of createReadStream(e.abs)) h.update(chunk as Buffer);
      h.update('\0');
    }
  }
  const args = Object.keys(buildArgs)
    .sort()
    .map((k) => [k, buildArgs[k]]);
  h.update(`buildargs\0${JSON.stringify(args)}`);
  if (network === 'none') h.update('\0network\0none');
  return h.digest('hex');
}

/** Docker repository names are lowercase [a-z0-9._-] components */
function repoComponent(s: string): string {
  return (
    s
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'x'
  );
}

export function imageTag(bundleName: string, envName: string, digest: string): string {
  return `openenv-bundle/${repoComponent(bundleName)}-${repoComponent(envName)}:${digest.slice(0, 12)}`;
}

export async function imageExists(docker: Dockerode, ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw toSandboxError(err, `inspecting image ${ref}`);
  }
}

export async function checkImage(docker: Dockerode, ref: string): Promise<void> {
  if (!(await imageExists(docker, ref))) {
    throw new SandboxError('no_image', `the Docker engine has no image ${ref}: build or pull it first`);
  }
}

/**
 * Reads the engine's build output (JSON objects, one a line). A failed step arrives as a line with
 * `error`/`errorDetail` on a stream that otherwise ends normally: returns its message, or null.
 */
export async function followBuildOutput(stream: NodeJS.ReadableStream, onLine: (line: string) => void): Promise<string | null> {
  let failure: string | null = null;
  const onMessage = (msg: ProgressLine) => {
    const failed = progressFailure(msg, 'unknown build error');
    if (failed !== null) {
      failure ??= failed;
      onLine(`ERROR: ${failure}`);
      return;
    }
    const out = msg.stream ?? (msg.status !== undefined ? `${msg.status}${msg.progress ? ` ${msg.progress}` : ''}` : undefined);
    if (out === undefined) return;
    for (const line of out.split(/\r?\n/)) if (line.trim()) onLine(line.trimEnd());
  };
  await forEachProgressLine(stream, onMessage, onLine);
  return failure;
}

/** an instruction's JSON array form (`["a", "b"]`), else null */
function execForm(args: string): string[] | null {
  if (!args.startsWith('[')) return null;
  try {
    const parsed: unknown = JSON.parse(args);
    return Array.isArray(parsed) ? parsed.map(String) : null;
  } catch {
    return null;
  }
}

/**
 * A Dockerfile's instructions as the engine reads them: continuation lines joined (with the
 * `# escape=` directive's character), comment lines dropped even inside a continuation.
 */
export function dockerfileInstructions(dockerfile: string): string[] {
  const lines = dockerfile.split(/\r?\n/);
  let escape = '\\';
  for (const l of lines) {
    const d = /^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$/.exec(l);
    if (!d) break;
    if (d[1]!.toLowerCase() === 'escape') escape = d[2]!;
  }
  const out: string[] = [];
  let current: string | null = null;
  for (const line of lines) {
    const t = line.trim();
    if (t.startsWith('#') || t === '') continue;
    const continued = t.endsWith(escape);
    const body = continued ? t.slice(0, -escape.length).trimEnd() : t;
    current = current === null ? body : `${current} ${body}`;
    if (!continued) {
      out.push(current);
      current = null;
    }
  }
  if (current !== null) out.push(current);
  return out;
}

/**
 * What a Dockerfile's ADD instructions fetch from elsewhere, or may (a source that is a variable).
 * The engine fetches an ADD's URL itself, on the host's network, whatever network the build's RUN
 * steps get: a build without network refuses them.
 */
export function addedUrls(dockerfile: string): string[] {
  const urls: string[] = [];
  for (const ins of dockerfileInstructions(dockerfile)) {
    const m = /^ADD\s+(.*)$/i.exec(ins);
    if (!m) continue;
    const words = execForm(m[1]!) ?? m[1]!.split(/\s+/);
    const sources = words.filter((w) => !w.startsWith('--')).slice(0, -1);
    urls.push(...sources.filter((w) => /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(w) || /^git@/.test(w) || w.includes('$')));
  }
  return urls;
}

/** how the engine says a RUN step failed (the classic builder, BuildKit) */
const RUN_FAILURE = /returned a non-zero code|did not complete successfully/;

/** When a RUN of a build without network failed: that it had none, and what to change; else ''. */
export function noNetworkHint(failure: string, req: Pick<ImageBuildRequest, 'network' | 'envName'>): string {
  if (req.network !== 'none' || !RUN_FAILURE.test(failure)) return '';
  return (
    ` (this image builds without network: bundle.json's envs.${req.envName}.build_network is "none", so a RUN that downloads fails;` +
    ' if you trust this Dockerfile, set it to "default" (a Harbor import: --build-with-network), or install from files in the build context)'
  );
}

/** what a build's failure says when the engine could not fetch a base image from its registry */
const PULL_FAILURE =
  /pull access denied|failed to resolve source metadata|failed to do request|dial tcp|no such host|i\/o timeout|TLS handshake timeout|manifest unknown|not found: manifest|toomanyrequests|connection refused|network is unreachable|server misbehaving|unauthorized: authentication required|error pulling image/i;

/**
 * When a build failed to pull its base image: which build argument chooses that image (an ARG
 * the Dockerfile's FROM lines use), so an offline host or a private mirror knows what to pass.
 * '' when the failure is something else.
 */
export function pullHint(failure: string, dockerfile: string, buildArgs: Record<string, string>): string {
  if (!PULL_FAILURE.test(failure)) return '';
  const froms = dockerfile.split('\n').filter((l) => /^\s*FROM\s/i.test(l));
  const args = [...new Set(froms.flatMap((l) => [...l.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!)))];
  if (args.length === 0) {
    return " (the engine could not pull the base image named in the Dockerfile's FROM: make it reachable, or load it into the engine first)";
  }
  const given = args.filter((a) => Object.hasOwn(buildArgs, a)).map((a) => `${a}=${buildArgs[a]}`);
  const local = args.filter((a) => Object.hasOwn(LOCAL_BASE_IMAGES, a)).map((a) => ({ arg: a, ...LOCAL_BASE_IMAGES[a]! }));
  return (
    ` (the engine could not pull the base image: choose one it has or can reach with the build argument ` +
    args.map((a) => `${a}=<image>`).join(', ') +
    ` — \`--build-arg ${args[0]}=<image>\`, or OPENENV_BUILD_ARG=${args[0]}=<image> under compose` +
    local.map((l, i) => `${i === 0 ? ', e.g. ' : '; '}${l.arg}=${l.image} offline (${l.script} makes it)`).join('') +
    (given.length ? `; given: ${given.join(', ')}` : '') +
    ')'
  );
}

/** builds unless the content-hash tag exists; concurrent calls for one tag share `inflight` */
export async function buildEnvImage(docker: Dockerode, req: ImageBuildRequest, inflight: Map<string, Promise<string>>): Promise<string> {
  const entries = await listContext(req);
  if (req.network === 'none') {
    const urls = addedUrls(await readFile(path.join(req.contextDir, 'Dockerfile'), 'utf8'));
    if (urls.length > 0) {
      throw buildFailure(
        req,
        `its Dockerfile ADDs ${urls.join(', ')}: the engine fetches an ADD's URL itself, on the host's network, and this image builds without network (envs.${req.envName}.build_network is "none"; a source that is a variable may be a URL); put the file in the build context and COPY it`,
      );
    }
  }
  const tag = imageTag(req.bundleName, req.envName, await contextDigest(entries, req.buildArgs, req.network));
  const running = inflight.get(tag);
  if (running) return running;
  const p = (async () => {
    throwIfAborted(req.signal);
    if (await imageExists(docker, tag)) {
      req.onProgress?.(`image ${tag} is up to date`);
      return tag;
    }
    if (req.lookOnly) throw new SandboxError('no_image', `the Docker engine has no image ${tag} for \`${req.envName}\``);
    req.onBuilding?.();
    req.onProgress?.(`building ${tag} from ${req.contextDir}`);
    const pack = tar.c(
      { cwd: req.contextDir, portable: true, noDirRecurse: true, follow: false },
      entries.map((e) => e.rel),
    );
    const context = Readable.from(pack as AsyncIterable<Buffer>);
    let output: NodeJS.ReadableStream;
    try {
      output = await docker.buildImage(context, {
        t: tag,
        buildargs: req.buildArgs,
        labels: { [LABELS.managed]: '1', [LABELS.bundle]: req.bundleName, [LABELS.env]: req.envName },
        rm: true,
        forcerm: true,
        // the RUN steps' containers: none, or the engine's default (its bridge, which reaches the host's)
        ...(req.network === 'none' ? { networkmode: 'none' } : {}),
        // an abort closes the build's connection: the engine cancels the build there
        ...(req.signal ? { abortSignal: req.signal } : {}),
      });
    } catch (err) {
      throwIfAborted(req.signal);
      if (typeof err === 'object' && err !== null && 'statusCode' in err) {
        throw buildFailure(req, `the engine refused the build: ${engineMessage(err)}`);
      }
      throw toSandboxError(err, `building image ${tag}`);
    }
    const failure = await followBuildOutput(output, (line) => req.onProgress?.(line)).catch((err: unknown) => {
      throwIfAborted(req.signal);
      throw toSandboxError(err, `building image ${tag}`);
    });
    throwIfAborted(req.signal);
    if (failure !== null) {
      const dockerfile = await readFile(path.join(req.contextDir, 'Dockerfile'), 'utf8').catch(() => '');
      throw buildFailure(req, failure + (noNetworkHint(failure, req) || pullHint(failure, dockerfile, req.buildArgs)));
    }
    if (!(await imageExists(docker, tag))) throw buildFailure(req, `the build ended without error but the engine has no image ${tag}`);
    return tag;
  })();
  inflight.set(tag, p);
  try {
    return await p;
  } finally {
    inflight.delete(tag);
  }
}
