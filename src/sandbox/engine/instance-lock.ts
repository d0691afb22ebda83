/**
 * One live server per instance name on an engine. The startup sweep and the reconciler remove
 * everything labelled with the instance: a second server under a name in use would destroy the
 * first one's episodes. So a server claims its name before it sweeps, with a liveness marker on
 * the engine, and refuses to start while another live server holds it.
 *
 * The marker is a labelled Docker volume (cheap: no address space, no image, nothing running),
 * named after the instance and the holder. Labels cannot change, so the heartbeat is a new marker
 * every `heartbeatMs` (the old one removed after): its label carries the time of the beat. A
 * holder whose newest beat is older than `missedBeats` of its own intervals is dead, and so is one
 * on this host, in this pid namespace, whose process is gone (a restart after a crash takes over
 * at once). A marker that is neither stale nor provably dead may belong to a server that died a
 * moment ago: a newcomer waits until it either beats again (alive: refuse, naming it) or goes
 * stale (take over). Clean shutdown removes the marker.
 *
 * A marker deleted by hand must not let a second server in (its start-up sweep would remove the
 * live holder's envs), so a live holder is found by more than the one volume:
 * - the holder watches the engine's volume events and writes its marker again the moment one of
 *   its markers is destroyed (and at every heartbeat, as before);
 * - a newcomer that found the name free writes its marker, waits `settleMs` (far longer than a
 *   holder takes to restore its marker) and looks again before it sweeps: a holder that claimed
 *   the name earlier (an older `since`) wins, and the newcomer backs off and waits for its beat;
 * - should two servers still both hold it, the one that claimed later finds the older holder at
 *   its next heartbeat, stops serving (onLost) and says so; the older one keeps the name.
 *
 * Times are the writers' clocks: servers sharing an engine are expected to agree on the time to
 * within a heartbeat.
 *
 * Long because the claim is one protocol: the markers, their heartbeat, who counts as dead, the
 * takeover and the sweep of abandoned names read the same labels and must agree on them; apart,
 * each half would restate the other's rules.
 */
import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type Dockerode from 'dockerode';
import { LABELS } from '../sandbox.js';
import { isConflict, removeOrGone } from './errors.js';
import type { SandboxLogger } from './logger.js';
import { silentLogger } from './logger.js';

export const LOCK_LABELS = {
  /** the instance name a marker claims */
  lock: 'io.openenv.bundle-server.lock',
  holder: 'io.openenv.bundle-server.lock.holder',
  host: 'io.openenv.bundle-server.lock.host',
  pid: 'io.openenv.bundle-server.lock.pid',
  pidns: 'io.openenv.bundle-server.lock.pidns',
  /** ms since the epoch, the holder's clock */
  heartbeat: 'io.openenv.bundle-server.lock.heartbeat',
  interval: 'io.openenv.bundle-server.lock.interval',
  /** when the holder claimed the name (ms) */
  since: 'io.openenv.bundle-server.lock.since',
} as const;

export interface InstanceLockOptions {
  instance: string;
  /** how often the holder renews its marker (default 5 s) */
  heartbeatMs?: number;
  /** beats a holder may miss before its name is taken over (default 3) */
  missedBeats?: number;
  /** the longest a newcomer waits for a holder to beat again or go stale (default: its stale window and one beat) */
  maxWaitMs?: number;
  /** how long a newcomer waits after writing its marker before it looks again and sweeps (default 1 s, at most a beat) */
  settleMs?: number;
  /** called once when this holder finds that an older holder has the name: it must stop serving */
  onLost?: (holder: HolderInfo) => void;
  logger?: SandboxLogger;
}

/** Another live server holds the instance name. */
export class InstanceInUseError extends Error {
  override readonly name = 'InstanceInUseError';
  constructor(
    readonly instance: string,
    readonly holder: HolderInfo,
  ) {
    super(
      `instance "${instance}" is in use by a live server (${describe(holder)}, last heartbeat ${Math.max(0, Math.round((Date.now() - holder.heartbeat) / 100) / 10)} s ago): ` +
        `its episodes would be swept; start this server with another --instance, or stop that one first`,
    );
  }
}

export interface HolderInfo {
  holder: string;
  host: string;
  pid: number;
  pidns: string;
  heartbeat: number;
  interval: number;
  since: number;
  markers: string[];
}

function describe(h: HolderInfo): string {
  return `host ${h.host}, pid ${h.pid}, holding it since ${new Date(h.since).toISOString()}`;
}

/** processes alive in this process (a test may run two servers in one process) */
const liveHolders = new Set<string>();

function ownPidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** a wait the claim's caller awaits: it keeps the process alive (a command may have nothing else to wait on) */
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A holder whose newest beat is older than `missedBeats` of its own intervals. */
function isStaleHolder(h: Pick<HolderInfo, 'heartbeat' | 'interval'>, missedBeats: number): boolean {
  return Date.now() - h.heartbeat > h.interval * missedBeats;
}

/** A holder on this host, in this pid namespace, whose process is gone. */
function isProvablyDead(h: Pick<HolderInfo, 'holder' | 'host' | 'pid' | 'pidns'>, host: string, pidns: string): boolean {
  if (h.host !== host || !h.pidns || h.pidns !== pidns || !(h.pid > 0)) return false;
  if (h.pid === process.pid) return !liveHolders.has(h.holder);
  return processGone(h.pid);
}

/** Every holder of every instance name whose markers are on the engine, by instance, each by its newest marker. */
async function holdersByInstance(docker: Dockerode, label: string): Promise<Map<string, HolderInfo[]>> {
  const res = (await docker.listVolumes({ filters: JSON.stringify({ label: [label] }) })) as {
    Volumes?: Array<{ Name: string; Labels?: Record<string, string> | null }> | null;
  };
  const byInstance = new Map<string, Map<string, HolderInfo>>();
  for (const v of res.Volumes ?? []) {
    const l = v.Labels ?? {};
    const instance = l[LOCK_LABELS.lock];
    if (instance === undefined) continue;
    const holder = l[LOCK_LABELS.holder] ?? v.Name;
    const info: HolderInfo = {
      holder,
      host: l[LOCK_LABELS.host] ?? '?',
      pid: Number(l[LOCK_LABELS.pid] ?? 0),
      pidns: l[LOCK_LABELS.pidns] ?? '',
      heartbeat: Number(l[LOCK_LABELS.heartbeat] ?? 0) || 0,
      interval: Number(l[LOCK_LABELS.interval] ?? 0) || 0,
      since: Number(l[LOCK_LABELS.since] ?? 0) || 0,
      markers: [v.Name],
    };
    const holders = byInstance.get(instance) ?? new Map<string, HolderInfo>();
    byInstance.set(instance, holders);
    const prev = holders.get(holder);
    if (!prev) holders.set(holder, info);
    else if (info.heartbeat > prev.heartbeat) holders.set(holder, { ...info, markers: [...prev.markers, v.Name] });
    else prev.markers.push(v.Name);
  }
  return new Map([...byInstance].map(([i, h]) => [i, [...h.values()]]));
}

/** An instance name nobody alive holds, and the lock markers its dead holders left. */
export interface AbandonedInstance {
  instance: string;
  markers: string[];
}

/**
 * The instance names starting with `prefix` that no live server holds, among those with markers
 * on the engine and `alsoSeen` (names read off labelled containers and networks: a resource whose
 * instance has no marker at all is abandoned too). A holder is dead as the lock judges it: stale
 * (missed `missedBeats` of its beats) or, on this host and pid namespace, its process gone.
 * `openenv-bundle check` runs under a fresh name each time; this is how a later run finds what a
 * killed one left.
 */
export async function abandonedInstances(docker: Dockerode, prefix: string, alsoSeen: Iterable<string> = [], missedBeats = 3): Promise<AbandonedInstance[]> {
  const host = hostname();
  const pidns = ownPidNamespace();
  const holders = await holdersByInstance(docker, LOCK_LABELS.lock);
  const names = new Set([...holders.keys(), ...alsoSeen].filter((i) => i.startsWith(prefix)));
  const out: AbandonedInstance[] = [];
  for (const instance of names) {
    const hs = holders.get(instance) ?? [];
    const alive = hs.some((h) => !(isStaleHolder({ heartbeat: h.heartbeat, interval: h.interval || 5_000 }, missedBeats) || isProvablyDead(h, host, pidns)));
    if (!alive) out.push({ instance, markers: hs.flatMap((h) => h.markers) });
  }
  return out.sort((a, b) => a.instance.localeCompare(b.instance));
}

/** Removes lock markers by name; one already gone (or being removed) is success. */
export async function removeLockMarkers(docker: Dockerode, names: string[]): Promise<void> {
  await Promise.all(names.map((n) => removeOrGone(() => docker.getVolume(n).remove(), isConflict)));
}

export class InstanceLock {
  readonly holderId = randomBytes(6).toString('hex');
  private readonly heartbeatMs: number;
  private readonly missedBeats: number;
  private readonly log: SandboxLogger;
  private readonly host = hostname();
  private readonly pidns = ownPidNamespace();
  private since = 0;
  private seq = 0;
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private held = false;
  private lost: HolderInfo | null = null;
  private events: (NodeJS.ReadableStream & { destroy?: () => void }) | null = null;
  private readonly settleMs: number;

  constructor(
    private readonly docker: Dockerode,
    private readonly opts: InstanceLockOptions,
  ) {
    this.heartbeatMs = opts.heartbeatMs ?? 5_000;
    this.missedBeats = opts.missedBeats ?? 3;
    this.log = opts.logger ?? silentLogger;
    this.settleMs = opts.settleMs ?? Math.min(1_000, this.heartbeatMs);
  }

  /**
   * Resolves once this server holds the name; rejects with InstanceInUseError while a live
   * server holds it. Markers of dead holders are removed.
   */
  async claim(): Promise<void> {
    if (this.held) return;
    const started = Date.now();
    /** the first beat seen of each doubtful holder: a later one proves it alive */
    const firstSeen = new Map<string, number>();
    const poll = Math.max(100, Math.min(1_000, Math.round(this.heartbeatMs / 5)));
    for (;;) {
      const others = await this.otherHolders();
      const live = await this.dropDead(others);
      if (live.length === 0) {
        this.since = Date.now();
        await this.beat();
        // a holder whose marker was deleted by hand restores it within moments; two newcomers at
        // once see each other's markers: look again after a while, before anything is swept
        await sleep(this.settleMs);
        const rivals = (await this.dropDead(await this.otherHolders())).filter((h) => this.yieldsTo(h));
        if (rivals.length === 0) {
          this.held = true;
          liveHolders.add(this.holderId);
          this.timer = setInterval(() => void this.renew(), this.heartbeatMs);
          this.timer.unref?.();
          void this.watchMarkers();
          this.log.info({ instance: this.opts.instance, holder: this.holderId }, 'claimed the instance name');
          return;
        }
        await this.removeMarkers(await this.ownMarkers());
        // an established holder: the loop waits for its next beat (alive: refuse)
        if (!rivals.some((h) => h.since < this.since)) await sleep(poll + Math.floor(Math.random() * this.heartbeatMs));
        continue;
      }
      for (const h of live) {
        const seen = firstSeen.get(h.holder);
        if (seen === undefined) {
          firstSeen.set(h.holder, h.heartbeat);
          this.log.info(
            { instance: this.opts.instance, holder: describe(h) },
            'the instance name has a holder: waiting for its next heartbeat (alive: refuse) or for it to go stale (dead: take over)',
          );
        } else if (h.heartbeat !== seen) {
          throw new InstanceInUseError(this.opts.instance, h);
        }
      }
      // a heartbeat that neither changes nor ages (a clock far ahead): not waited on forever
      const patience = this.opts.maxWaitMs ?? Math.max(...live.map((h) => h.interval)) * (this.missedBeats + 1);
      if (Date.now() - started > patience) throw new InstanceInUseError(this.opts.instance, live[0]!);
      await sleep(poll);
    }
  }

  /** stops the heartbeat and removes this holder's markers; idempotent */
  async release(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.events?.destroy?.();
    this.events = null;
    await this.beating?.catch(() => {});
    if (!this.held) return;
    this.held = false;
    liveHolders.delete(this.holderId);
    await this.removeMarkers(await this.ownMarkers());
    this.log.info({ instance: this.opts.instance, holder: this.holderId }, 'released the instance name');
  }

  private async renew(): Promise<void> {
    if (this.beating) return;
    this.beating = (async () => {
      try {
        await this.beat();
        const others = (await this.otherHolders()).filter((h) => !this.isStale(h) && !this.provablyDead(h));
        const older = others.find((h) => this.yieldsTo(h));
        if (older && !this.lost) {
          this.lost = older;
          this.log.error(
            { instance: this.opts.instance, holder: describe(older) },
            'another server has held this instance name since before this one claimed it: this server stops serving (no new episodes, its own torn down)',
          );
          this.opts.onLost?.(older);
        } else if (others.length > 0 && !this.lost) {
          this.log.warn(
            { instance: this.opts.instance, holders: others.map(describe) },
            'a newer server claimed this instance name (a marker was deleted, or our heartbeat was late): it stops serving once it sees this one',
          );
        }
      } catch (err) {
        this.log.warn({ instance: this.opts.instance, err: (err as Error).message }, 'could not renew the instance claim; retrying at the next heartbeat');
      }
    })().finally(() => (this.beating = null));
    await this.beating;
  }

  /** who keeps the name when two hold it: the one that claimed it first (ties: the smaller id) */
  private yieldsTo(h: HolderInfo): boolean {
    return h.since < this.since || (h.since === this.since && h.holder < this.holderId);
  }

  /**
   * While held: a destroyed marker of this holder (deleted by hand, a volume prune) is written
   * again at once, not at the next heartbeat, so a newcomer finds it before it sweeps.
   */
  private async watchMarkers(): Promise<void> {
    try {
      const stream = (await this.docker.getEvents({
        // a volume's events carry its name, not its labels: the markers are told by their names
        filters: JSON.stringify({ type: ['volume'], event: ['destroy'] }),
      })) as NodeJS.ReadableStream & { destroy?: () => void };
      if (!this.held) return stream.destroy?.();
      this.events = stream;
      let buf = '';
      stream.on('data', (chunk: Buffer) => {
        buf += chunk.toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          try {
            const ev = JSON.parse(line) as { Actor?: { ID?: string; Attributes?: Record<string, string> } };
            if (ev.Actor?.ID?.startsWith(this.markerPrefix())) this.onMarkerDestroyed();
          } catch {
            // not an event line
          }
        }
      });
      stream.on('error', () => undefined);
      stream.on('end', () => {
        // the engine closed the stream (a restart): the heartbeat still restores, and a new watch starts
        if (this.events === stream && this.held) {
          this.events = null;
          setTimeout(() => void this.watchMarkers(), this.heartbeatMs).unref?.();
        }
      });
    } catch (err) {
      this.log.warn(
        { instance: this.opts.instance, err: (err as Error).message },
        'cannot watch the instance markers; a deleted one is restored at the next heartbeat',
      );
    }
  }

  private onMarkerDestroyed(): void {
    if (!this.held) return;
    void (async () => {
      // our own beat removes the previous marker: only a holder left with none restores
      if ((await this.ownMarkers().catch(() => ['?'])).length > 0) return;
      this.log.warn({ instance: this.opts.instance, holder: this.holderId }, 'the instance marker was removed from outside: writing it again');
      await this.renew();
    })();
  }

  /** every marker of this holder is named `<prefix><seq>` */
  private markerPrefix(): string {
    const slug =
      this.opts.instance
        .replace(/[^a-zA-Z0-9_.-]+/g, '-')
        .replace(/^[^a-zA-Z0-9]+/, '')
        .slice(0, 60) || 'instance';
    return `openenv-lock-${slug}-${this.holderId}-`;
  }

  /** a new marker with a fresh heartbeat, then the older ones of this holder removed */
  private async beat(): Promise<void> {
    const now = Date.now();
    const name = `${this.markerPrefix()}${++this.seq}`;
    const older = await this.ownMarkers();
    await this.docker.createVolume({
      Name: name,
      Driver: 'local',
      Labels: {
        [LABELS.managed]: '1',
        [LOCK_LABELS.lock]: this.opts.instance,
        [LOCK_LABELS.holder]: this.holderId,
        [LOCK_LABELS.host]: this.host,
        [LOCK_LABELS.pid]: String(process.pid),
        [LOCK_LABELS.pidns]: this.pidns,
        [LOCK_LABELS.heartbeat]: String(now),
        [LOCK_LABELS.interval]: String(this.heartbeatMs),
        [LOCK_LABELS.since]: String(this.since),
      },
    });
    await this.removeMarkers(older.filter((n) => n !== name));
  }

  private async listMarkers(): Promise<Array<{ name: string; labels: Record<string, string> }>> {
    const res = (await this.docker.listVolumes({ filters: JSON.stringify({ label: [`${LOCK_LABELS.lock}=${this.opts.instance}`] }) })) as {
      Volumes?: Array<{ Name: string; Labels?: Record<string, string> | null }> | null;
    };
    return (res.Volumes ?? []).map((v) => ({ name: v.Name, labels: v.Labels ?? {} }));
  }

  private async ownMarkers(): Promise<string[]> {
    return (await this.listMarkers()).filter((m) => m.labels[LOCK_LABELS.holder] === this.holderId).map((m) => m.name);
  }

  /** every other holder, by its newest marker */
  private async otherHolders(): Promise<HolderInfo[]> {
    const holders = (await holdersByInstance(this.docker, `${LOCK_LABELS.lock}=${this.opts.instance}`)).get(this.opts.instance) ?? [];
    return holders.filter((h) => h.holder !== this.holderId).map((h) => ({ ...h, interval: h.interval || this.heartbeatMs }));
  }

  private isStale(h: HolderInfo): boolean {
    return isStaleHolder(h, this.missedBeats);
  }

  private provablyDead(h: HolderInfo): boolean {
    return isProvablyDead(h, this.host, this.pidns);
  }

  /** removes the markers of dead holders; returns the others */
  private async dropDead(holders: HolderInfo[]): Promise<HolderInfo[]> {
    const live: HolderInfo[] = [];
    for (const h of holders) {
      if (this.isStale(h) || this.provablyDead(h)) {
        this.log.warn(
          { instance: this.opts.instance, holder: h.holder, host: h.host, pid: h.pid, heartbeatAgeMs: Date.now() - h.heartbeat },
          'taking over the instance name from a server that is gone',
        );
        await this.removeMarkers(h.markers);
      } else {
        live.push(h);
      }
    }
    return live;
  }

  private removeMarkers(names: string[]): Promise<void> {
    return removeLockMarkers(this.docker, names);
  }
}
