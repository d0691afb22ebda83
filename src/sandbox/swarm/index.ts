/** The swarm sandbox: what the rest of the server (and its tests) import from here. */
export { SwarmSandbox, type SwarmSandboxOptions } from './swarm-sandbox.js';
export { createSwarmSandbox } from './factory.js';
export { EnvLostError } from './task-watch.js';
