/**
 * A task's verifier, run in a container once the agent's part is over (docs/harbor.md,
 * "verifiers"; docs/security.md, "Verification modes"): the agent's own container (in-place,
 * after the stop and the toolchain check) or a fresh one of the same image given the agent's
 * outputs (clean). Either way its tests are copied to /tests (emptied first: nothing the agent left
 * there counts), /logs/verifier is emptied and made again (a reward file the agent wrote counts for
 * nothing; a /logs the agent turned into a file or a link is replaced), `bash /tests/test.sh` runs
 * under the verifier's timeout as a session whose process group is killed whole when it passes,
 * and the reward file it leaves becomes the scores, unless the verifier could not run its tests
 * (bootstrap.ts: its setup needed the network or a tool the image lacks; a `failed` outcome,
 * never a reward). Every step of the server's runs in the toolbox,
 * and the reward file is read through the engine's archive API from the host: a link, a pipe or a
 * folder there is a malformed reward, never followed, opened or waited on. Its output is kept,
 * bounded, for the transcript; it is never shown to the model.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { VERIFIER } from '../defaults.js';
import { packFolder, readArchivedPath, runKillable, runTrusted, type BoundedText } from '../container/index.js';
import { singleFileTar, type ContainerExec } from '../sandbox/container-exec.js';
import { NO_PYTEST_MODULE_NAME, bootstrapFailure, mayBeBootstrapFailure, missingBootstrapTools, networkHint } from './bootstrap.js';
import { ARTIFACTS_DIR, LOGS_DIR, PYCACHE_PREFIX, REWARD_DIR, REWARD_JSON, REWARD_TXT, TESTS_DIR, TEST_SCRIPT, TEST_SCRIPT_NAME } from './layout.js';
import { REWARD_FILE_MAX_BYTES, parseRewardJson, parseRewardText, type Scores } from './reward-files.js';
import { AGENT_LOGS_DIR, TRAJECTORY_FILE_NAME } from './trajectory.js';

export interface VerifierSpec {
  /** the task's tests: a folder of this machine holding test.sh and its helpers */
  testsDir: string;
  timeoutMs: number;
  /** variables the verifier runs with, besides the container's */
  env?: Record<string, string>;
  /** where test.sh starts; default: the image's WORKDIR */
  workdir?: string;
  /** who runs test.sh (uid:gid); default: the image's USER */
  user?: string;
  /** the agent's trajectory (ATIF, trajectory.ts), written to /logs/agent/trajectory.json before test.sh */
  trajectory?: () => unknown;
}

export interface VerifierRun {
  /** what test.sh wrote (stdout and stderr), first and last bytes kept */
  output: BoundedText;
  exitCode: number | null;
  durationMs: number;
}

export type VerifierOutcome =
  | { status: 'scored'; scores: Scores; rewardFile: 'reward.txt' | 'reward.json'; run: VerifierRun }
  /** no reward file, or a malformed one: the episode ends invalid_scores */
  | { status: 'invalid'; message: string; run: VerifierRun }
  /** still running at its timeout, and killed: the episode ends verifier_timeout */
  | { status: 'timeout'; message: string; run: VerifierRun }
  /** it could not run its tests (its bootstrap failed: bootstrap.ts), and wrote no reward or no pass: the episode ends verifier_failed */
  | { status: 'failed'; message: string; run: VerifierRun };

/** what a failure carries of the verifier's output: its last bytes */
export function outputTail(run: VerifierRun, bytes: number = VERIFIER.failureTailBytes): string {
  const text = run.output.text;
  const buf = Buffer.from(text);
  if (buf.length <= bytes) return text;
  return `[...]${buf
    .subarray(buf.length - bytes)
    .toString('utf8')
    .replace(/^\uFFFD+/, '')}`;
}

/**
 * The toolbox's shell, as root: /tests, /logs/verifier and /logs/agent gone (whatever they were: a
 * link is removed, not followed), /logs a real folder again (one the agent turned into a file or a
 * link is replaced), then /tests, /logs/verifier, /logs/agent and /logs/artifacts made, verifier
 * and artifacts writable by every user (test.sh may run as any), agent readable by all (the
 * server's trajectory: nothing the agent left there counts).
 */
const PREPARE_SCRIPT = `
set -e
if [ -L ${LOGS_DIR} ] || { [ -e ${LOGS_DIR} ] && [ ! -d ${LOGS_DIR} ]; }; then rm -rf ${LOGS_DIR}; fi
rm -rf ${TESTS_DIR} ${REWARD_DIR} ${AGENT_LOGS_DIR}
if [ -L ${ARTIFACTS_DIR} ] || { [ -e ${ARTIFACTS_DIR} ] && [ ! -d ${ARTIFACTS_DIR} ]; }; then rm -rf ${ARTIFACTS_DIR}; fi
mkdir -p ${TESTS_DIR} ${REWARD_DIR} ${ARTIFACTS_DIR} ${AGENT_LOGS_DIR}
chmod 0755 ${TESTS_DIR} ${AGENT_LOGS_DIR}
chmod 0777 ${REWARD_DIR} ${ARTIFACTS_DIR}
`;

/**
 * Empties /tests, /logs/verifier and /logs/agent, making /logs a real folder again (PREPARE_SCRIPT):
 * installTests' first step, which a caller may begin early, beside steps of its own, once nothing
 * of the agent's runs in the container.
 */
export async function prepareVerifierDirs(exec: ContainerExec): Promise<void> {
  const prepared = await runTrusted(exec, 'openenv-prepare-tests', PREPARE_SCRIPT);
  if (prepared.exitCode !== 0)
    throw new Error(`could not prepare ${TESTS_DIR} and ${REWARD_DIR} in the container: ${prepared.stderr || `exit code ${prepared.exitCode}`}`);
}

/**
 * Empties /tests, /logs/verifier and /logs/agent (making /logs a real folder again; `prepared`:
 * that step, begun by the caller), then streams `testsDir` into /tests and, when given, the
 * trajectory into /logs/agent/trajectory.json (owned by root, readable by all).
 */
export async function installTests(exec: ContainerExec, testsDir: string, trajectory?: unknown, prepared?: Promise<void>): Promise<void> {
  const tests = await packFolder(testsDir, TESTS_DIR.slice(1));
  await (prepared ?? prepareVerifierDirs(exec));
  if (trajectory === undefined) {
    await exec.putArchive('/', tests);
    return;
  }
  // one archive, one call of the engine: the trajectory's entry (its archive without the end's two zero blocks), then the tests'
  const json = Buffer.from(`${JSON.stringify(trajectory, null, 2)}\n`);
  const head = singleFileTar(`${AGENT_LOGS_DIR.slice(1)}/${TRAJECTORY_FILE_NAME}`, json, { mode: 0o644, uid: 0, gid: 0 }).subarray(0, -1024);
  await exec.putArchive(
    '/',
    Readable.from(
      (async function* () {
        yield head;
        for await (const chunk of tests as AsyncIterable<Buffer>) yield chunk;
      })(),
    ),
  );
}

/**
 * The toolbox's shell, with the image's environment: which of the tools (a name looked up in the
 * folders of PATH, never as the toolbox's own applet; a path; pytest for `python -m`, in the
 * system's Python folders) the container has; printed one a line.
 */
const PRESENT_SCRIPT = `
for t in "$@"; do
  case "$t" in
    '${NO_PYTEST_MODULE_NAME}') for d in /usr/lib/python3*/*-packages/pytest /usr/local/lib/python3*/*-packages/pytest; do [ -d "$d" ] && { echo "$t"; break; }; done ;;
    */*) [ -e "$t" ] && echo "$t" ;;
    *) IFS=:; for d in $PATH; do [ -f "$d/$t" ] && [ -x "$d/$t" ] && { echo "$t"; break; }; done; unset IFS ;;
  esac
done
true
`;

/** which of the tools test.sh's output says are missing the container has after all (the output may hold what the agent's program printed) */
async function presentTools(exec: ContainerExec, tools: readonly string[]): Promise<Set<string>> {
  if (tools.length === 0) return new Set();
  const r = await runTrusted(exec, 'openenv-tools-present', PRESENT_SCRIPT, tools, { imageUser: true, keepEnv: true });
  return new Set(
    r.stdout
      .toString('utf8')
      .split('\n')
      .filter((t) => tools.includes(t)),
  );
}

/** Removes a turn's tests and reward files, so that the next turn finds neither. */
export async function clearVerifierFiles(exec: ContainerExec): Promise<void> {
  const r = await runTrusted(exec, 'openenv-clear-tests', `rm -rf ${TESTS_DIR}; [ -d ${LOGS_DIR} ] && rm -rf ${REWARD_DIR} ${AGENT_LOGS_DIR}; true`);
  if (r.exitCode !== 0) throw new Error(`could not remove ${TESTS_DIR} and ${REWARD_DIR} after the verifier: ${r.stderr || `exit code ${r.exitCode}`}`);
}

type RewardFileRead = { text: string } | { problem: string } | null;

/** a reward file as the engine archives it: null when missing; a problem when it is no regular file or too large */
async function readRewardFile(exec: ContainerExec, file: string): Promise<RewardFileRead> {
  const found = await readArchivedPath(exec, file, REWARD_FILE_MAX_BYTES + 1);
  if (found === null) return null;
  if (found.kind !== 'file')
    return {
      problem: `${file} is a ${found.kind === 'dir' ? 'folder' : found.kind === 'symlink' ? 'symbolic link' : found.kind === 'fifo' ? 'named pipe' : 'special file'}, not a regular file`,
    };
  if (found.size > REWARD_FILE_MAX_BYTES) return { problem: `${file} holds ${found.size} bytes, more than a reward file's ${REWARD_FILE_MAX_BYTES}` };
  return { text: found.data.toString('utf8') };
}

/**
 * Installs the tests, runs test.sh, then reads the reward file it left. `gate` runs between the
 * install and test.sh; `settle` between test.sh and the reading: what test.sh left running (a
 * process of the agent's code it ran, in a session of its own) must not write the reward after
 * test.sh has ended (verified-task.ts stops such processes there).
 */
export async function runVerifier(
  exec: ContainerExec,
  spec: VerifierSpec,
  hooks: {
    /** the install's first step (prepareVerifierDirs), already begun by the caller: the install waits for it instead */
    prepared?: Promise<void>;
    /** runs once the tests are installed, before test.sh (a check run beside the install: it may throw to stop here) */
    gate?: () => Promise<void>;
    settle?: () => Promise<void>;
    /** told as each step ends (install, gate, tests, settle, reward_read): the turn end's timings */
    stepEnded?: (step: 'install' | 'gate' | 'tests' | 'settle' | 'reward_read') => void;
  } = {},
): Promise<VerifierOutcome> {
  await installTests(exec, spec.testsDir, spec.trajectory?.(), hooks.prepared);
  hooks.stepEnded?.('install');
  await hooks.gate?.();
  hooks.stepEnded?.('gate');
  const ran = await runKillable(
    exec,
    {
      cmd: ['bash', TEST_SCRIPT],
      env: { ...spec.env, PYTHONPYCACHEPREFIX: PYCACHE_PREFIX },
      ...(spec.workdir ? { workdir: spec.workdir } : {}),
      ...(spec.user ? { user: spec.user } : {}),
    },
    spec.timeoutMs,
    { headBytes: VERIFIER.outputHeadBytes, tailBytes: VERIFIER.outputTailBytes },
  );
  const run: VerifierRun = { output: ran.output, exitCode: ran.exitCode, durationMs: ran.durationMs };
  hooks.stepEnded?.('tests');
  if (ran.timedOut) {
    return { status: 'timeout', message: `the verifier (tests/test.sh) was still running after ${spec.timeoutMs / 1000} s and was killed`, run };
  }
  await hooks.settle?.();
  hooks.stepEnded?.('settle');
  // as Harbor reads them: reward.txt when there is one, else reward.json
  const txt = await readRewardFile(exec, REWARD_TXT);
  const json = txt === null ? await readRewardFile(exec, REWARD_JSON) : null;
  hooks.stepEnded?.('reward_read');
  const found = txt ?? json;
  // a verifier whose own setup failed wrote no reward, or a 0 that is no score of the agent's
  const couldNotRun = async (scores: Scores | null): Promise<VerifierOutcome | null> => {
    if (!mayBeBootstrapFailure(run.output.text, scores)) return null;
    const script = await readFile(path.join(spec.testsDir, TEST_SCRIPT_NAME), 'utf8').catch(() => '');
    const present = await presentTools(exec, missingBootstrapTools(run.output.text));
    const why = bootstrapFailure(run.output.text, script, scores, present);
    if (why === null) return null;
    const wrote =
      scores === null
        ? 'wrote no reward'
        : `wrote ${Object.entries(scores)
            .map(([k, v]) => `${k} = ${v}`)
            .join(', ')}, which is not counted`;
    return {
      status: 'failed',
      message:
        `the verifier (tests/test.sh, exit code ${ran.exitCode}) could not run its tests: ${why}; it ${wrote}. ` +
        'Envs have no network here: the image must carry what test.sh runs (docs/harbor.md#tests-that-fetch)',
      run,
    };
  };
  if (found === null) {
    return (
      (await couldNotRun(null)) ?? {
        status: 'invalid',
        message: `the verifier (tests/test.sh, exit code ${ran.exitCode}) wrote no reward: neither ${REWARD_TXT} nor ${REWARD_JSON} exists${networkHint(run.output.text)}`,
        run,
      }
    );
  }
  if ('problem' in found) return { status: 'invalid', message: `the verifier wrote a malformed reward: ${found.problem}`, run };
  const read = txt !== null ? parseRewardText(found.text) : parseRewardJson(found.text);
  if ('problem' in read) return { status: 'invalid', message: `the verifier wrote a malformed reward: ${read.problem}`, run };
  return (await couldNotRun(read.scores)) ?? { status: 'scored', scores: read.scores, rewardFile: read.file, run };
}
