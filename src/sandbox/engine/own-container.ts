/**
 * When the server itself runs in a container (the engine's socket mounted), it reaches an env only
 * after joining the env's episode network; for that it needs its own container id.
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import type Dockerode from 'dockerode';

const FULL_ID = /\b([0-9a-f]{64})\b/g;

async function readOr(file: string): Promise<string> {
  return readFile(file, 'utf8').catch(() => '');
}

/** where to look (files to read, the hostname); tests point them at another container's */
export interface OwnContainerSources {
  mountinfo: string;
  cgroup: string;
  hostname: string;
}

/** where the engine bind-mounts a container's own files of it */
const OWN_FILES = new Set(['/etc/hostname', '/etc/hosts', '/etc/resolv.conf']);

const OWN_SOURCES: OwnContainerSources = { mountinfo: '/proc/self/mountinfo', cgroup: '/proc/self/cgroup', hostname: os.hostname() };

/** candidate ids, most trustworthy first: the engine bind-mounts /etc/hostname etc. from /var/lib/docker/containers/<id>/ */
export async function ownContainerIdCandidates(sources: Partial<OwnContainerSources> = {}): Promise<string[]> {
  const { mountinfo: mountinfoFile, cgroup, hostname } = { ...OWN_SOURCES, ...sources };
  const out: string[] = [];
  const mountinfo = await readOr(mountinfoFile);
  for (const line of mountinfo.split('\n')) {
    // the engine's file of a container (the mount's root, field 4) mounted at this process's own
    // /etc/hostname, /etc/hosts or /etc/resolv.conf (its mount point, field 5): on the engine's own
    // host the engine mounts those files of other containers too (under /var/lib/docker/, while it
    // copies files in or out of them), and none of those is this process's
    const [, , , root = '', point = ''] = line.split(' ');
    const m = /\/containers\/([0-9a-f]{64})\//.exec(root);
    if (m?.[1] && OWN_FILES.has(point)) out.push(m[1]);
  }
  for (const m of (await readOr(cgroup)).matchAll(FULL_ID)) if (m[1]) out.push(m[1]);
  // Docker's default hostname is the 12-hex short id.
  if (/^[0-9a-f]{12}$/.test(hostname)) out.push(hostname);
  return [...new Set(out)];
}

/** the full id of the container this process runs in, confirmed by the engine; null when not in one */
export async function detectOwnContainerId(docker: Dockerode, sources: Partial<OwnContainerSources> = {}): Promise<string | null> {
  for (const candidate of await ownContainerIdCandidates(sources)) {
    try {
      const info = await docker.getContainer(candidate).inspect();
      // inspect also resolves names: accept only an id that is really this candidate's
      if (info.Id.startsWith(candidate) && info.State.Running) return info.Id;
    } catch {
      // not a container of this engine
    }
  }
  return null;
}
