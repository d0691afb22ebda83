/**
 * Stopping the agent: before a verifier runs, every process the agent started is killed, whatever
 * it did to survive (a loop that forks and lets its parent exit so its pid keeps moving, setsid,
 * nohup, a double fork, a new pid namespace, a process that ignores SIGTERM, dozens at once). All
 * of it runs in the toolbox (src/sandbox/toolbox.ts), never the image's `sh` or `cat`:
 *
 * 1. freeze: SIGSTOP to every process of the container but the toolbox's own shell and process 1
 *    (`kill -STOP -1`), again until no thread is left running. A stopped process cannot fork,
 *    exit or move, so the table read next is the whole truth and stays so;
 * 2. list: each process's pid, state and start time, sent to the server, which decides which are
 *    the agent's (AgentIntervals below: a policy in TypeScript, tested on its own);
 * 3. kill: SIGKILL to those (a stopped process dies of it at once), then SIGCONT to all, so what
 *    the image and the server's setup run goes on; the table is read again to see none of those
 *    killed is alive (what the image runs may start processes once thawed: those are not the agent's).
 *
 * "The agent's" is told by start time: the server marks the container's clock (the kernel's
 * boot-relative start times in /proc, in clock ticks) when the agent's part begins and when it
 * pauses for the server's own setup (a turn's upload, setup.sh, ready check). A mark is read by a
 * process of the toolbox started for the purpose: its own start time is the tick, and every
 * process already there with a start time at or past that tick is listed with it (those came
 * before the mark, within the same tick). A process started after a begin mark and before the
 * next pause mark is the agent's; what the image runs (process 1, the keeper's wait, an http env's
 * server, a service its entrypoint started) and what a turn's setup started are spared.
 */
import { ContainerGoneError, type ContainerExec, type ExecProcess } from '../sandbox/container-exec.js';
import { runTrusted } from './run.js';

/** A point of the container's clock, as the processes there see it. */
export interface ClockMark {
  /** clock ticks since the kernel booted: the start time of the process that read it */
  tick: number;
  /** `pid:start` of the processes that already ran when it was read with a start time ≥ tick: they came before it */
  before: ReadonlySet<string>;
}

/** field 22 (starttime) of a /proc/<pid>/stat line; the command name (field 2) may hold spaces and parentheses */
export function startTimeOf(statLine: string): number {
  const rest = statLine
    .slice(statLine.lastIndexOf(')') + 2)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state): field 22 is rest[19]
  const v = Number(rest[19]);
  if (!Number.isInteger(v)) throw new Error(`not a /proc/<pid>/stat line: ${JSON.stringify(statLine.slice(0, 120))}`);
  return v;
}

/**
 * The toolbox's shell: its own start time (the mark's tick: `read` is a builtin, so /proc/self is
 * this shell), then `pid start` of every other process started at or after it.
 */
const CLOCK_SCRIPT = `
self=$$
read -r line < /proc/self/stat
rest=\${line##*) }; set -- $rest; tick=\${20}
echo "tick $tick"
for d in /proc/[0-9]*; do
  p=\${d#/proc/}; [ "$p" = "$self" ] && continue
  line=""; read -r line < "$d/stat" 2>/dev/null || continue
  rest=\${line##*) }; set -- $rest
  [ "\${20}" -ge "$tick" ] 2>/dev/null && echo "$p \${20}"
done
exit 0
`;

/** Reads a mark of the container's clock (as root, by the toolbox). */
export async function containerClock(exec: ContainerExec): Promise<ClockMark> {
  const r = await runTrusted(exec, 'openenv-clock', CLOCK_SCRIPT);
  const lines = r.stdout.toString('utf8').trim().split('\n');
  const tick = Number(/^tick (\d+)$/.exec(lines[0] ?? '')?.[1]);
  if (r.exitCode !== 0 || !Number.isInteger(tick)) throw new Error(`could not read the container's clock: ${r.stderr || `exit code ${r.exitCode}`}`);
  const before = new Set<string>();
  for (const l of lines.slice(1)) {
    const m = /^(\d+) (\d+)$/.exec(l);
    if (m) before.add(`${m[1]}:${m[2]}`);
  }
  return { tick, before };
}

/** whether process `pid` started at `start` came before `mark` */
function cameBefore(mark: ClockMark, pid: number, start: number): boolean {
  return start < mark.tick || mark.before.has(`${pid}:${start}`);
}

/** The agent's parts of the episode, between marks of the container's clock. */
export class AgentIntervals {
  private readonly spans: { from: ClockMark; to: ClockMark | null }[] = [];

  /** the agent's part begins (the episode's first step, the end of a turn's setup) */
  begin(at: ClockMark): void {
    const last = this.spans[this.spans.length - 1];
    if (last && last.to === null) return;
    this.spans.push({ from: at, to: null });
  }

  /** it pauses (the server's own setup of the next turn, the verifier) */
  pause(at: ClockMark): void {
    const last = this.spans[this.spans.length - 1];
    if (last && last.to === null) last.to = at;
  }

  get empty(): boolean {
    return this.spans.length === 0;
  }

  /** whether a process started within one of the agent's parts */
  isAgents(pid: number, start: number): boolean {
    return this.spans.some((s) => !cameBefore(s.from, pid, start) && (s.to === null || cameBefore(s.to, pid, start)));
  }
}

/** One process of the container, as the stop lists it. */
export interface ProcessRow {
  pid: number;
  /** its state letter (R, S, D, T, Z, …) */
  state: string;
  start: number;
}

/** the rows of a table the stop script printed (`p <pid> <state> <start>`) */
export function parseRows(text: string): ProcessRow[] {
  const rows: ProcessRow[] = [];
  for (const line of text.split('\n')) {
    const m = /^p (\d+) (\S) (\d+)$/.exec(line);
    if (m) rows.push({ pid: Number(m[1]), state: m[2]!, start: Number(m[3]) });
  }
  return rows;
}

/**
 * The toolbox's shell, as root. Freezes (SIGSTOP to all but itself and process 1, until every
 * thread is stopped, at most ROUNDS rounds), prints the table and `frozen <rounds> <running>`, reads
 * one line of pids to kill from the server, kills them, resumes everyone (SIGCONT), waits (at most
 * a second) until they are dead, then prints the table again and `done`. Only builtins between the
 * first SIGSTOP and the SIGCONT: it forks nothing a freeze round could catch.
 */
const STOP_SCRIPT = `
exec 2>/dev/null
self=$$
table() {
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}; [ "$p" = "$self" ] && continue; [ "$p" = 1 ] && continue
    line=""; read -r line < "$d/stat" || continue
    rest=\${line##*) }; set -- $rest
    # its own children (the waits' usleep) are none of the agent's
    [ "$2" = "$self" ] && continue
    echo "p $p $1 \${20}"
  done
}
round=0
while :; do
  round=$((round + 1))
  kill -STOP -1
  running=0
  for t in /proc/[0-9]*/task/[0-9]*; do
    p=\${t#/proc/}; p=\${p%%/*}
    [ "$p" = "$self" ] && continue; [ "$p" = 1 ] && continue
    line=""; read -r line < "$t/stat" || continue
    rest=\${line##*) }; set -- $rest
    case "$1" in T|t|Z|X) ;; *) running=$((running + 1)) ;; esac
  done
  [ "$running" = 0 ] && break
  [ "$round" -ge 200 ] && break
done
table
echo "frozen $round $running"
read -r victims
killed=0
for v in $victims; do kill -KILL "$v" && killed=$((killed + 1)); done
kill -CONT -1
echo "killed $killed"
# a killed process takes a moment to die (under gVisor, a loaded machine's): up to a second, in steps
wait_round=0
while [ "$wait_round" -lt 100 ]; do
  alive=0
  for v in $victims; do
    line=""; read -r line < "/proc/$v/stat" || continue
    rest=\${line##*) }; set -- $rest
    case "$1" in Z|X) ;; *) alive=1; break ;; esac
  done
  [ "$alive" = 0 ] && break
  wait_round=$((wait_round + 1))
  usleep 10000
done
table
echo "done"
`;

export interface StopResult {
  /** how many of the agent's processes were killed */
  killed: number;
  /** of the processes it killed, how many were still alive (not zombies) a second after */
  left: number;
  /** those, as `pid state` (for a message) */
  leftRows: string[];
  /** freeze rounds it took; and threads still running when it gave up (0: all were stopped) */
  rounds: number;
  unfrozen: number;
}

/** one round of the stop; a container that is gone has nothing left to kill */
async function stopOnce(exec: ContainerExec, intervals: AgentIntervals): Promise<StopResult> {
  let text = '';
  let sent = false;
  let decided: { killedRows: ProcessRow[]; rounds: number; unfrozen: number } | null = null;
  const answer = (chunk: Buffer, proc: ExecProcess) => {
    text += chunk.toString('utf8');
    if (sent) return;
    const frozen = /^frozen (\d+) (\d+)$/m.exec(text);
    if (!frozen) return;
    sent = true;
    const rows = parseRows(text.slice(0, frozen.index)).filter((r) => intervals.isAgents(r.pid, r.start));
    decided = { killedRows: rows, rounds: Number(frozen[1]), unfrozen: Number(frozen[2]) };
    proc.write(`${rows.map((r) => r.pid).join(' ')}\n`);
    proc.endInput();
  };
  const r = await runTrusted(exec, 'openenv-stop-agent', STOP_SCRIPT, [], { onStdout: answer, maxStdout: 4 * 1024 * 1024 });
  const d = decided as { killedRows: ProcessRow[]; rounds: number; unfrozen: number } | null;
  const killedLine = /^killed (\d+)$/m.exec(text);
  if (r.exitCode !== 0 || !d || !killedLine || !/^done$/m.test(text)) {
    throw new Error(`could not stop the agent's processes: the toolbox said ${JSON.stringify(text.slice(-300))}${r.stderr ? ` (${r.stderr})` : ''}`);
  }
  // what was killed and is still alive (a pid the kernel gave again, started since, is another process): what the image
  // runs may well start processes after the thaw, and those are not the agent's
  const killed = new Set(d.killedRows.map((r) => `${r.pid}:${r.start}`));
  const after = parseRows(text.slice(killedLine.index));
  const left = after.filter((row) => row.state !== 'Z' && row.state !== 'X' && killed.has(`${row.pid}:${row.start}`));
  return { killed: Number(killedLine[1]), left: left.length, leftRows: left.map((r) => `${r.pid} ${r.state}`), rounds: d.rounds, unfrozen: d.unfrozen };
}

/**
 * Kills every process the agent started (freeze, list, kill, thaw: above), twice more should one
 * still be there after; resolves with what it did. A container that is gone has nothing to kill.
 */
export async function stopAgentProcesses(exec: ContainerExec, intervals: AgentIntervals): Promise<StopResult> {
  const none: StopResult = { killed: 0, left: 0, leftRows: [], rounds: 0, unfrozen: 0 };
  if (intervals.empty) return none;
  try {
    let total = 0;
    let last = none;
    for (let attempt = 0; attempt < 3; attempt++) {
      last = await stopOnce(exec, intervals);
      total += last.killed;
      if (last.left === 0) break;
    }
    return { ...last, killed: total };
  } catch (e) {
    if (e instanceof ContainerGoneError) return none;
    throw e;
  }
}
