/**
 * A task's verifier, run in the episode's container once the agent's part is over
 * (docs/harbor.md, "verifiers"): its tests are copied to /tests — which is emptied first, so
 * nothing the agent left there counts, and which never exists before this moment — /logs/verifier
 * is emptied (a reward file the agent wrote counts for nothing), `bash /tests/test.sh` runs under
 * the verifier's timeout in a process group that is killed whole when it passes, and the reward
 * file it leaves becomes the scores. Its output is kept, bounded, for the transcript; it is never
 * shown to the model.
 */
import { VERIFIER } from '../defaults.js';
import type { BoundedText } from '../tools/shell/bounded-output.js';
import type { ContainerExec } from '../sandbox/container-exec.js';
import { FileToolError, readFileSlice } from '../tools/shell/files.js';
import { runKillable, runToEnd } from '../tools/shell/run-command.js';
import { packFolder } from './pack.js';
import { ARTIFACTS_DIR, REWARD_DIR, REWARD_JSON, REWARD_TXT, TESTS_DIR, TEST_SCRIPT } from './layout.js';
import { parseRewardJson, parseRewardText, type Scores } from './reward-files.js';

export interface VerifierSpec {
  /** the task's tests: a folder of this machine holding test.sh and its helpers */
  testsDir: string;
  timeoutMs: number;
  /** variables the verifier runs with, besides the container's */
  env?: Record<string, string>;
  /** where test.sh starts; default: the image's WORKDIR */
  workdir?: string;
  /** who runs test.sh; default: the image's USER */
  user?: string;
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
  | { status: 'timeout'; message: string; run: VerifierRun };

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

/** an output that says the network was needed: worth telling, since envs here have none */
const NEEDS_NETWORK =
  /could not resolve host|temporary failure in name resolution|name or service not known|network is unreachable|failed to establish a new connection|connection timed out|unable to connect to|failed to fetch http/i;

function networkHint(run: VerifierRun): string {
  return NEEDS_NETWORK.test(run.output.text)
    ? ' (its output suggests it needed the network, which envs do not have here: a verifier must find what it runs in the image)'
    : '';
}

async function readIfThere(exec: ContainerExec, file: string): Promise<string | null> {
  try {
    return (await readFileSlice(exec, file, 0, 64 * 1024)).data.toString('utf8');
  } catch (e) {
    if (e instanceof FileToolError && /^no such file/.test(e.message)) return null;
    throw e;
  }
}

/** Empties /tests and /logs/verifier, then copies `testsDir` into /tests. */
export async function installTests(exec: ContainerExec, testsDir: string): Promise<void> {
  const prepared = await runToEnd(exec, {
    cmd: ['sh', '-c', `rm -rf ${TESTS_DIR} ${REWARD_DIR} && mkdir -p ${TESTS_DIR} ${REWARD_DIR} ${ARTIFACTS_DIR} && chmod 0777 ${REWARD_DIR} ${ARTIFACTS_DIR}`],
    user: '0',
  });
  if (prepared.exitCode !== 0) throw new Error(`could not prepare ${TESTS_DIR} and ${REWARD_DIR} in the container: ${prepared.output.text.trim()}`);
  await exec.putArchive(TESTS_DIR, await packFolder(testsDir, ''));
}

export async function runVerifier(exec: ContainerExec, spec: VerifierSpec): Promise<VerifierOutcome> {
  await installTests(exec, spec.testsDir);
  const ran = await runKillable(
    exec,
    {
      cmd: ['bash', TEST_SCRIPT],
      ...(spec.env ? { env: spec.env } : {}),
      ...(spec.workdir ? { workdir: spec.workdir } : {}),
      ...(spec.user ? { user: spec.user } : {}),
    },
    spec.timeoutMs,
    { headBytes: VERIFIER.outputHeadBytes, tailBytes: VERIFIER.outputTailBytes },
  );
  const run: VerifierRun = { output: ran.output, exitCode: ran.exitCode, durationMs: ran.durationMs };
  if (ran.timedOut) {
    return { status: 'timeout', message: `the verifier (tests/test.sh) was still running after ${spec.timeoutMs / 1000} s and was killed`, run };
  }
  const text = await readIfThere(exec, REWARD_TXT);
  const json = text === null ? await readIfThere(exec, REWARD_JSON) : null;
  if (text === null && json === null) {
    return {
      status: 'invalid',
      message: `the verifier (tests/test.sh, exit code ${ran.exitCode}) wrote no reward: neither ${REWARD_TXT} nor ${REWARD_JSON} exists${networkHint(run)}`,
      run,
    };
  }
  const read = text !== null ? parseRewardText(text) : parseRewardJson(json!);
  if ('problem' in read) return { status: 'invalid', message: `the verifier wrote a malformed reward: ${read.problem}`, run };
  return { status: 'scored', scores: read.scores, rewardFile: read.file, run };
}
