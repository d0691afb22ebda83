/** Importing Harbor tasks (the Terminal-Bench format) as bundles: docs/harbor.md. */
export { ImportError, importHarbor, type AggregatedNote, type ImportOptions, type ImportResult } from './import.js';
export { mapTasks, type MapOptions } from './map.js';
export type { ImportDraft } from './draft.js';
export { mapDockerfileImages, matchRule, parseBaseImageRule, parseImageRef, type BaseImageRule, type DockerfileImages, type ImageRef } from './dockerfile.js';
export { readTaskConfig, type TaskNote, type HarborConfig, type HarborStep } from './task-config.js';
export { IMAGE_CHOICES, readHarborTask, type HarborTask, type HarborTurn, type ImagesChoice } from './read-task.js';
export { readCompose, type ComposeMain, type ComposeRead } from './compose.js';
export { engineHasImages } from './engine-images.js';
