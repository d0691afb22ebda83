/** Before the fast layer: say what it is, so a run of it alone is never mistaken for the whole suite. */
export default function setup(): void {
  process.stdout.write('\nfast layer: no Docker (envs run as child processes on 127.0.0.1; the *.docker.test.ts files are the docker layer)\n\n');
}
