/**
 * Before a verifier runs, what the agent left running in the env's container is killed: a
 * background job, a server it was asked to start and forgot, anything that could still write
 * while test.sh runs (a reward file, the files under test). "The agent's" is told by start time:
 * the server marks the container's clock (the kernel's boot-relative start times in /proc, in
 * clock ticks) when the agent's part begins and when it pauses for the server's own setup (a
 * turn's upload, setup.sh, ready check), and every process started within an agent's interval is
 * killed (SIGKILL), a few rounds over, so that one forked while the first round ran goes too.
 * What the image itself runs (PID 1, the keep-alive, an http env's server and its workers) and
 * what a turn's setup started are spared: they started outside those intervals.
 */
import { ContainerGoneError, type ContainerExec } from '../sandbox/container-exec.js';
import { runToEnd } from '../tools/shell/run-command.js';

/** A point of the container's clock: clock ticks since the kernel booted, as /proc/<pid>/stat field 22 says. */
export type ContainerClock = number;

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

/** The container's clock now: the start time of a process started for the purpose. */
export async function containerClock(exec: ContainerExec): Promise<ContainerClock> {
  const r = await runToEnd(exec, { cmd: ['cat', '/proc/self/stat'], user: '0' });
  if (r.exitCode !== 0) throw new Error(`could not read the container's clock (/proc/self/stat): ${r.output.text.trim()}`);
  return startTimeOf(r.output.text);
}

/** Intervals of the agent's part, [from, to) in the container's clock; `to` null: still open. */
export class AgentIntervals {
  private readonly spans: { from: ContainerClock; to: ContainerClock | null }[] = [];

  /** the agent's part begins (the episode's first step, the end of a turn's setup) */
  begin(at: ContainerClock): void {
    const last = this.spans[this.spans.length - 1];
    if (last && last.to === null) return;
    this.spans.push({ from: at, to: null });
  }

  /** it pauses (the server's own setup of the next turn, the verifier) */
  pause(at: ContainerClock): void {
    const last = this.spans[this.spans.length - 1];
    if (last && last.to === null) last.to = at;
  }

  /** "from:to" pairs for the kill script (to -1: open) */
  toArgs(): string[] {
    return this.spans.map((s) => `${s.from}:${s.to ?? -1}`);
  }
}

/**
 * sh (no forks in the scan: read and parameter expansion only): $@ are from:to intervals; kills
 * every process but itself whose start time falls in one, up to three rounds, and prints how many
 * (`killed N`). A killed process stays listed as a zombie until its parent reaps it: zombies
 * (state Z, X) are skipped. Its own complaints (a process gone mid-scan) go nowhere.
 */
const KILL_SCRIPT = `
exec 2>/dev/null
self=$$; intervals="$*"; killed=0
for round in 1 2 3; do
  victims=""
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    [ "$p" = "$self" ] && continue
    line=""; read -r line < "$d/stat" 2>/dev/null || continue
    rest=\${line##*) }
    set -- $rest
    case "$1" in Z|X) continue ;; esac
    st=\${20}
    for iv in $intervals; do
      from=\${iv%%:*}; to=\${iv#*:}
      if [ "$st" -ge "$from" ] && { [ "$to" = -1 ] || [ "$st" -lt "$to" ]; }; then victims="$victims $p"; break; fi
    done
  done
  [ -z "$victims" ] && break
  for v in $victims; do kill -9 "$v" 2>/dev/null && killed=$((killed + 1)); done
done
echo "killed $killed"
`;

/** Kills every process the agent started (as root); resolves with how many were killed. A container that is gone has nothing left to kill. */
export async function stopAgentProcesses(exec: ContainerExec, intervals: AgentIntervals): Promise<number> {
  const args = intervals.toArgs();
  if (args.length === 0) return 0;
  try {
    const r = await runToEnd(exec, { cmd: ['sh', '-c', KILL_SCRIPT, 'openenv-stop-agent', ...args], user: '0' });
    if (r.exitCode !== 0) throw new Error(`could not stop the agent's processes: ${r.output.text.trim()}`);
    const said = /^killed (\d+)$/m.exec(r.output.text);
    if (!said) throw new Error(`could not stop the agent's processes: the script said ${JSON.stringify(r.output.text.slice(0, 300))}`);
    return Number(said[1]);
  } catch (e) {
    if (e instanceof ContainerGoneError) return 0;
    throw e;
  }
}
