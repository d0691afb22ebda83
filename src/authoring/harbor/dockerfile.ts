/**
 * The images a Harbor task's Dockerfile builds from (FROM, COPY --from), and the offline mapping
 * of public base images to local ones (`--base-image FROM=LOCAL`): matched by repository and
 * tag, a pinned digest set aside and said so, the Dockerfile rewritten with the old line kept as
 * a comment above the new one.
 */

export interface ImageRef {
  /** as written */
  text: string;
  /** the repository with its registry, Docker Hub's spelled out: docker.io/library/debian */
  repository: string;
  /** `latest` when none is written */
  tag: string;
  digest: string | null;
}

/** Parses an image reference; null for what is not one (a variable left unresolved, scratch). */
export function parseImageRef(text: string): ImageRef | null {
  if (text === '' || /[$\s]/.test(text)) return null;
  let rest = text;
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag = 'latest';
  const slash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > slash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  if (rest === '' || tag === '') return null;
  const parts = rest.split('/');
  const first = parts[0]!;
  const hasRegistry = parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost');
  let repository = rest.toLowerCase();
  if (!hasRegistry) repository = parts.length === 1 ? `docker.io/library/${repository}` : `docker.io/${repository}`;
  else if (first === 'index.docker.io' || first === 'registry-1.docker.io') repository = `docker.io/${parts.slice(1).join('/')}`;
  if (repository.startsWith('docker.io/') && repository.split('/').length === 2) repository = `docker.io/library/${repository.slice('docker.io/'.length)}`;
  return { text, repository, tag, digest };
}

export interface BaseImageRule {
  /** what it matches: a repository, with a tag or for every tag */
  from: { repository: string; tag: string | null };
  fromText: string;
  /** the local image used instead */
  to: string;
}

/** `debian:bookworm=openenv-local/debian:bookworm` (a FROM without a tag matches every tag); throws with what is wrong */
export function parseBaseImageRule(text: string): BaseImageRule {
  const eq = text.lastIndexOf('=');
  if (eq <= 0 || eq === text.length - 1)
    throw new Error(`--base-image expects FROM=LOCAL (e.g. debian:bookworm=openenv-local/debian:bookworm), got ${JSON.stringify(text)}`);
  const fromText = text.slice(0, eq);
  const to = text.slice(eq + 1);
  const ref = parseImageRef(fromText);
  if (!ref || ref.digest !== null) throw new Error(`--base-image ${JSON.stringify(text)}: ${JSON.stringify(fromText)} is not an image repository[:tag]`);
  if (!parseImageRef(to)) throw new Error(`--base-image ${JSON.stringify(text)}: ${JSON.stringify(to)} is not an image reference`);
  const slash = fromText.lastIndexOf('/');
  const hasTag = fromText.lastIndexOf(':') > slash;
  return { from: { repository: ref.repository, tag: hasTag ? ref.tag : null }, fromText, to };
}

/** the rule for `ref`: one naming its tag first, else one for every tag of its repository */
export function matchRule(ref: ImageRef, rules: readonly BaseImageRule[]): BaseImageRule | null {
  const same = rules.filter((r) => r.from.repository === ref.repository);
  return same.find((r) => r.from.tag === ref.tag) ?? same.find((r) => r.from.tag === null) ?? null;
}

export interface DockerfileImages {
  /** the Dockerfile, its image references mapped */
  text: string;
  /** every image the build needs (after mapping), in order, without repeats */
  images: string[];
  /** what was mapped: the reference as written → the local image, and whether a digest was set aside */
  mapped: { from: string; to: string; digestSetAside: boolean }[];
  /** references that could not be read (a variable without a default) */
  unresolved: string[];
}

/** ARG defaults before the first FROM, which FROM lines may use */
function globalArgs(lines: string[]): Map<string, string> {
  const args = new Map<string, string>();
  for (const line of lines) {
    const t = line.trim();
    if (/^FROM\s/i.test(t)) break;
    const m = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/i.exec(t);
    if (m) args.set(m[1]!, (m[2] ?? '').trim().replace(/^"(.*)"$/, '$1'));
  }
  return args;
}

function substitute(text: string, args: Map<string, string>, buildArgs: Record<string, string>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, braced: string | undefined, fallback: string | undefined, bare: string | undefined) => {
      const name = (braced ?? bare)!;
      const value = buildArgs[name] ?? args.get(name) ?? fallback;
      return value === undefined || value === '' ? whole : value;
    },
  );
}

/**
 * Reads a Dockerfile's FROM lines and COPY --from references, maps what `rules` match and says
 * which images the build needs. Stage names (FROM x AS name) and `scratch` are not images.
 */
export function mapDockerfileImages(dockerfile: string, rules: readonly BaseImageRule[], buildArgs: Record<string, string> = {}): DockerfileImages {
  const lines = dockerfile.split('\n');
  const args = globalArgs(lines);
  const stages = new Set<string>();
  const images: string[] = [];
  const mapped: DockerfileImages['mapped'] = [];
  const unresolved: string[] = [];
  const out: string[] = [];
  const need = (image: string) => {
    if (!images.includes(image)) images.push(image);
  };
  /** the reference to build from, mapped when a rule matches */
  const resolve = (written: string): string => {
    const text = substitute(written, args, buildArgs);
    if (text.toLowerCase() === 'scratch' || stages.has(text.toLowerCase())) return written;
    const ref = parseImageRef(text);
    if (!ref) {
      unresolved.push(written);
      return written;
    }
    const rule = matchRule(ref, rules);
    if (!rule) {
      need(text);
      return written;
    }
    mapped.push({ from: text, to: rule.to, digestSetAside: ref.digest !== null });
    need(rule.to);
    return rule.to;
  };
  for (const line of lines) {
    const from = /^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$/i.exec(line);
    if (from) {
      const [, head, flags, image, tail] = from as unknown as [string, string, string, string, string];
      const to = resolve(image);
      const stage = /^\s+AS\s+(\S+)/i.exec(tail);
      if (stage) stages.add(stage[1]!.toLowerCase());
      if (to !== image) {
        out.push(`# openenv-bundle import: was ${line.trim()}`);
        out.push(`${head}${flags}${to}${tail}`);
      } else {
        out.push(line);
      }
      continue;
    }
    const copy = /^(\s*(?:COPY|ADD)\s+(?:--\S+\s+)*?--from=)(\S+)(.*)$/i.exec(line);
    if (copy && !/^\d+$/.test(copy[2]!)) {
      const [, head, image, tail] = copy as unknown as [string, string, string, string];
      const to = resolve(image);
      if (to !== image) {
        out.push(`# openenv-bundle import: was ${line.trim()}`);
        out.push(`${head}${to}${tail}`);
      } else {
        out.push(line);
      }
      continue;
    }
    out.push(line);
  }
  return { text: out.join('\n'), images, mapped, unresolved };
}

/** commands that download when a RUN step runs them (package managers, fetchers), as command words */
const DOWNLOADERS =
  /(?:^|[\s;&|(])((?:apt-get|apt|apk|yum|dnf|microdnf|zypper|pacman|pip3?|pipx|uv|poetry|conda|mamba|micromamba|npm|npx|yarn|pnpm|bun|gem|cargo|curl|wget|composer|cpanm?|Rscript|install2\.r|git (?:clone|fetch|pull)|go (?:get|install|mod))(?=[\s;&|)]|$))/g;

/**
 * The downloading commands a Dockerfile's RUN steps name (`apt-get`, `pip`, `curl`…), each once:
 * a hint that its build needs the network, not a proof either way.
 */
export function downloadsIn(instructions: readonly string[]): string[] {
  const found = new Set<string>();
  for (const ins of instructions) {
    const run = /^RUN\s+(.*)$/i.exec(ins);
    if (!run) continue;
    for (const m of run[1]!.replace(/\s+/g, ' ').matchAll(DOWNLOADERS)) found.add(m[1]!);
  }
  return [...found];
}

/** commands that install software into the system (the toolchain an in-place verifier checks), as command words */
const INSTALLERS =
  /(?:^|[\s;&|(])((?:apt-get|apt|aptitude|dpkg|apk|yum|dnf|zypper|pacman) (?:-\S+ )*(?:install|add|-i)|(?:pip3?|uv pip|pipx|conda|mamba) (?:-\S+ )*install|(?:npm|pnpm|yarn) (?:-\S+ )*(?:install|i|add) (?:-\S+ )*-g|(?:npm|pnpm) (?:-\S+ )*(?:install|i) (?:--global)|(?:cargo|gem|go) install|make install)(?=[\s;&|)]|$)/g;

/** The installing commands a shell script names (`apt-get install`, `pip install`…), each once: a hint, not a proof. */
export function installsIn(script: string): string[] {
  const found = new Set<string>();
  for (const m of script
    .replace(/\\\n/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .matchAll(INSTALLERS))
    found.add(m[1]!.replace(/ -\S+/g, ''));
  return [...found];
}

/** what the image's last stage runs at its start, as its Dockerfile writes it: a hint for readiness (docs/harbor.md, Readiness) */
export interface StartCommands {
  /** its ENTRYPOINT, as written; null when the last stage sets none */
  entrypoint: string | null;
  /** its CMD, as written, when it is not a bare shell (`bash`, `/bin/sh -l`); null otherwise */
  serviceCmd: string | null;
  /** the last stage declares a HEALTHCHECK (other than `HEALTHCHECK NONE`) */
  healthcheck: boolean;
}

const SHELLS = new Set(['sh', 'bash', 'dash', 'ash', 'zsh', 'fish', 'ksh']);

/** the words of an instruction's argument: a JSON array's items, else split on spaces */
function words(arg: string): string[] {
  const t = arg.trim();
  if (t.startsWith('[')) {
    try {
      const a: unknown = JSON.parse(t);
      if (Array.isArray(a)) return a.map(String);
    } catch {
      // the shell form after all
    }
  }
  return t.split(/\s+/).filter(Boolean);
}

/** A Dockerfile's (its `dockerfileInstructions`) last stage's ENTRYPOINT, CMD and HEALTHCHECK. */
export function startCommands(instructions: readonly string[]): StartCommands {
  const out: StartCommands = { entrypoint: null, serviceCmd: null, healthcheck: false };
  for (const ins of instructions) {
    const m = /^(\w+)\s*(.*)$/s.exec(ins);
    if (!m) continue;
    const [, keyword, arg = ''] = m;
    switch (keyword!.toUpperCase()) {
      case 'FROM':
        Object.assign(out, { entrypoint: null, serviceCmd: null, healthcheck: false });
        break;
      case 'ENTRYPOINT':
        out.entrypoint = words(arg).length > 0 ? arg.trim() : null;
        break;
      case 'CMD': {
        const w = words(arg);
        const bareShell = w.length > 0 && SHELLS.has(w[0]!.split('/').pop()!) && w.slice(1).every((x) => x.startsWith('-') && x !== '-c');
        out.serviceCmd = w.length === 0 || bareShell ? null : arg.trim();
        break;
      }
      case 'HEALTHCHECK':
        out.healthcheck = !/^NONE\b/i.test(arg.trim());
        break;
    }
  }
  return out;
}
