/**
 * Whether a verifier could not run its tests (docs/verifiers.md, "A verifier that could not run";
 * docs/harbor.md, "Tests that fetch"): the standard Harbor test.sh installs curl, uv and pytest
 * at run time, and with no network here it ends without running a test, writing 0. That 0 is no
 * score of the agent's: the episode ends `verifier_failed` instead, with the verifier's output.
 *
 * The rule, all three must hold:
 * 1. the verifier did not pass: it wrote no reward, or every score it wrote is 0 or less (a
 *    reward above 0 stands, whatever its output says);
 * 2. no test ran, as far as its output tells: no pytest session (its "test session starts"
 *    header, "collected N items", or its closing "… in 0.12s" line);
 * 3. its own bootstrap failed, by one of:
 *    - test.sh's own shell said a tool it runs to set up or run its tests is missing
 *      (`/tests/test.sh: line 10: uvx: command not found`; `…: /root/.local/bin/env: No such
 *      file or directory`), or Python said it has no pytest (`python3: No module named pytest`),
 *      and the container indeed has no such tool (the server looks after test.sh: a line the
 *      agent's program printed to look like one does not count); a program the tests run (the
 *      agent's) that is missing is reported by the tests, or by test.sh for a name that is not a
 *      bootstrap tool, and scores its 0;
 *    - test.sh itself fetches (apt-get, curl, pip, uv…: fetchesIn), its output says the network
 *      was needed (a name that did not resolve, a fetch that failed), and either it wrote no
 *      reward or test.sh runs pytest (which then never started). (A test.sh that fetches nothing
 *      does not count: what printed a network failure was a program it ran, maybe the agent's.)
 * A test.sh that runs something other than pytest and wrote 0 after a failed fetch is scored:
 * its tests may have run without what it fetched.
 */
import { TEST_SCRIPT } from './layout.js';
import type { Scores } from './reward-files.js';

/** an output that says the network was needed (apt, curl, pip, uv, npm): envs here have none */
const NEEDS_NETWORK =
  /could not resolve host|temporary failure resolving|temporary failure in name resolution|name or service not known|network is unreachable|failed to establish a new connection|newconnectionerror|connection timed out|unable to connect to|failed to fetch:? \W?https?:|could not fetch url|getaddrinfo (?:eai_again|enotfound)|dns error/i;

/** the programs a test.sh runs to set itself up or to start its tests: missing, the tests cannot run */
export const BOOTSTRAP_TOOLS: readonly string[] = [
  'apt-get',
  'apt',
  'curl',
  'wget',
  'uv',
  'uvx',
  'pip',
  'pip3',
  'pipx',
  'pytest',
  'py.test',
  'python',
  'python3',
  'npm',
  'npx',
  'node',
  'yarn',
  'pnpm',
  'bun',
];

/** what an installer leaves for test.sh to source (uv's and rustup's `env` files) */
const INSTALLER_ENV_FILE = /\/\.local\/bin\/env$|\/\.cargo\/env$/;

const escaped = TEST_SCRIPT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** bash's own words when test.sh (run as `bash /tests/test.sh`) cannot find what it runs or sources */
const TEST_SH_MISSING = new RegExp(`^${escaped}: line \\d+: (.+?): (command not found|No such file or directory)\\s*$`, 'gm');
/** Python's words for `python3 -m pytest` without pytest (an import in a test says `ModuleNotFoundError: No module named 'x'`) */
const NO_PYTEST_MODULE = /^(?:\S*\/)?python[0-9.]*: No module named (?:pytest|pip|uv)\s*$/m;
/** pytest's own lines: a session started, its items collected, its closing summary */
const PYTEST_RAN = /test session starts|^collected \d+ items?|^=+ .*\b(?:passed|failed|errors?|skipped|xfailed|no tests ran)\b.* in \d+(?:\.\d+)?s\b.*=+\s*$/m;
/** test.sh runs pytest (directly, through uvx or uv run, or python -m) */
const RUNS_PYTEST = /\bpy\.?test\b/;

/** what fetches when a test.sh runs it, by its name (the import's note names them too): a guess from the script's words */
const FETCHERS: readonly [string, RegExp][] = [
  ['apt-get install', /\bapt(?:-get)?\s[^\n;&|]*\binstall\b/],
  ['apt-get update', /\bapt(?:-get)?\s[^\n;&|]*\bupdate\b/],
  ['curl … | sh', /\bcurl\b[^\n|]*\|\s*(?:ba)?sh\b/],
  ['wget', /\bwget\s/],
  ['uvx', /(?:^|[\s;&|(])uvx\s/m],
  ['uv', /(?:^|[\s;&|(])uv\s+(?:pip\s+install|run|sync|add|tool\s+install|python\s+install)\b/m],
  ['pip install', /\bpip3?\s[^\n;&|]*\binstall\b/],
  ['npm install', /\b(?:npm\s+(?:-\S+\s+)*(?:install|i|ci)|npx|yarn\s+(?:add|install)|pnpm\s+(?:add|install))\b/],
];

/** the fetching commands a test.sh names, each once, in the table's order */
export function fetchesIn(script: string): string[] {
  const text = script
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n');
  return FETCHERS.filter(([, re]) => re.test(text)).map(([name]) => name);
}

/** the first lines of `text` that say the network was needed (null: none) */
export function networkEvidence(text: string): string | null {
  const lines = text.split('\n').filter((l) => NEEDS_NETWORK.test(l));
  if (lines.length === 0) return null;
  return lines
    .slice(0, 2)
    .map((l) => l.trim())
    .join(' / ');
}

/** what missingBootstrapTools calls Python's `-m pytest` without pytest */
export const NO_PYTEST_MODULE_NAME = 'pytest (python -m)';

/** the tools test.sh's own shell (or Python's -m) said are missing, among the bootstrap tools, each once */
export function missingBootstrapTools(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(TEST_SH_MISSING)) {
    const what = m[1]!;
    const base = what.split('/').pop()!;
    if (BOOTSTRAP_TOOLS.includes(base) || INSTALLER_ENV_FILE.test(what)) found.add(what);
  }
  if (NO_PYTEST_MODULE.test(text)) found.add(NO_PYTEST_MODULE_NAME);
  return [...found];
}

/** pytest reported a session: the tests ran */
export function testsRan(text: string): boolean {
  return PYTEST_RAN.test(text);
}

/** a reward that is a pass: some score above 0 */
function passes(scores: Scores | null): boolean {
  return scores !== null && Object.values(scores).some((v) => v > 0);
}

/** the output may tell a bootstrap failure (rules 1 and 2 hold): only then is the container asked which tools it has */
export function mayBeBootstrapFailure(output: string, scores: Scores | null): boolean {
  return !passes(scores) && !testsRan(output);
}

/**
 * Why the verifier could not run its tests, by the rule above (null: it ran them, or nothing
 * says otherwise): `output` is what test.sh printed, `script` its text, `scores` what it wrote
 * (null: no reward file), `present` the tools said missing that the container has (not missing).
 */
export function bootstrapFailure(output: string, script: string, scores: Scores | null, present: ReadonlySet<string> = new Set()): string | null {
  if (!mayBeBootstrapFailure(output, scores)) return null;
  const missing = missingBootstrapTools(output).filter((t) => !present.has(t));
  const network = networkEvidence(output);
  const why: string[] = [];
  if (missing.length > 0) why.push(`test.sh found no ${missing.join(', ')}`);
  // network failures count only where test.sh itself fetches: a program of the agent's that test.sh
  // runs can print anything, and would otherwise turn its own 0 into a verifier that could not run
  const fetches = fetchesIn(script).length > 0;
  if (network !== null && fetches && (missing.length > 0 || scores === null || RUNS_PYTEST.test(script))) why.push(`it needed the network (${network})`);
  return why.length > 0 ? why.join('; ') : null;
}

/** one sentence for a verifier that failed for want of the network, beside another reason (e.g. no reward) */
export function networkHint(output: string): string {
  return networkEvidence(output) !== null
    ? ' (its output suggests it needed the network, which envs do not have here: a verifier must find what it runs in the image)'
    : '';
}
