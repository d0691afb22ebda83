/**
 * The Docker backend's door: what the rest of the server (and its tests) use of a Docker engine.
 * Nothing outside src/sandbox/ imports src/sandbox/engine/ (the lint's floors rule says so): the
 * engine machinery both backends share stays behind the Sandbox interface and this door. What
 * passes through it: the sandbox itself; the env images as `check`, `import harbor` and `build`
 * make, find and pull them on a local engine; a Dockerfile's instructions and the URLs its ADDs
 * fetch; the engine's own words for an error; exec in a container, for the shell toolset's tests
 * and bench.
 */
export { DockerSandbox, type DockerSandboxOptions } from './docker-sandbox.js';
export { detectOwnContainerId } from '../engine/own-container.js';
export { addedUrls, buildEnvImage, dockerfileInstructions, imageExists } from '../engine/image-build.js';
export { pullImage } from '../engine/image-pull.js';
export { engineMessage } from '../engine/errors.js';
export { DockerContainerExec, FrameDemuxer } from '../engine/docker-exec.js';
