/**
 * The reaper's process (reaper.ts says what it does): `node reaper-main.js INSTANCE SERVER_PID`,
 * its stdin the server's end of the pipe. Started by `serve`, never by hand.
 */
import { watchAndReap } from './reaper.js';

const [instance, pid] = process.argv.slice(2);
if (!instance || !Number.isInteger(Number(pid))) {
  process.stderr.write('usage: reaper-main.js INSTANCE SERVER_PID (started by openenv-bundle serve)\n');
  process.exit(2);
}
// a signal to the server's process group (Ctrl-C in its terminal) must not end the watcher
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);
watchAndReap(instance, Number(pid), process.stdin).then(
  () => process.exit(0),
  () => process.exit(1),
);
