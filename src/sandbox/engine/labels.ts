import { LABELS } from '../sandbox.js';

/** Who a resource belongs to; every container and network is created with all of these. */
export interface Owner {
  instance: string;
  bundle: string;
  episode: string;
  env: string;
}

export function ownerLabels(owner: Owner): Record<string, string> {
  return {
    [LABELS.managed]: '1',
    [LABELS.instance]: owner.instance,
    [LABELS.bundle]: owner.bundle,
    [LABELS.episode]: owner.episode,
    [LABELS.env]: owner.env,
  };
}

/** dockerode `filters` selecting this instance's resources, optionally one episode's */
export function labelFilters(instance: string, episode?: string): { label: string[] } {
  const label = [`${LABELS.managed}=1`, `${LABELS.instance}=${instance}`];
  if (episode !== undefined) label.push(`${LABELS.episode}=${episode}`);
  return { label };
}

/** Docker names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*; labels carry the real ids, names only help people. */
export function resourceName(...parts: string[]): string {
  const slug = parts
    .map((p) =>
      p
        .replace(/[^a-zA-Z0-9_.-]+/g, '-')
        .replace(/^[^a-zA-Z0-9]+/, '')
        .slice(0, 40),
    )
    .filter(Boolean)
    .join('-');
  return `openenv-${slug}-${Math.random().toString(36).slice(2, 8)}`;
}
