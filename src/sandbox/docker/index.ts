/** The Docker sandbox: what the rest of the server (and its tests) import from here. */
export { DockerSandbox, type DockerSandboxOptions } from './docker-sandbox.js';
export { detectOwnContainerId } from '../engine/own-container.js';
