/** The Docker sandbox: what the rest of the server (and its tests) import from here. */
export { DockerSandbox, type DockerSandboxOptions } from './docker-sandbox.js';
export { EnvGoneError } from './env-watch.js';
export { InstanceInUseError, type InstanceLockOptions } from '../engine/instance-lock.js';
export { detectOwnContainerId } from '../engine/own-container.js';
export { SubnetPool } from './subnet-pool.js';
export type { SandboxLogger } from '../engine/logger.js';
