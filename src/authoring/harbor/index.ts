/** Importing Harbor tasks (the Terminal-Bench format) as bundles: docs/harbor.md. */
export { ImportError, importHarbor, type AggregatedFinding, type ImportOptions, type ImportResult } from './import.js';
export { mapDockerfileImages, matchRule, parseBaseImageRule, parseImageRef, type BaseImageRule, type DockerfileImages, type ImageRef } from './dockerfile.js';
export { readTaskConfig, type Finding, type HarborConfig, type HarborStep } from './task-config.js';
export { readHarborTask, type HarborTask, type HarborTurn } from './read-task.js';
export { engineHasImages } from './engine-images.js';
