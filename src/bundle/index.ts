/** The bundle: its format (schemas), loading and validation, archive extraction, and its env images. */
export { BundleError, MAX_REPORTED_ISSUES, formatIssue, type BundleIssue } from './errors.js';
export {
  BaselinesSchema,
  GroupsSchema,
  type Baselines,
  type Groups,
  END_TURN,
  EnvManifestSchema,
  EnvResourcesSchema,
  ManifestSchema,
  TaskLineSchema,
  TaskRowSchema,
  ToolSpecSchema,
  ToolsetSchema,
  type EnvManifest,
  type Manifest,
  type TaskLine,
  type TaskRow,
  type ToolSpec,
  type Toolset,
  BUILTIN_TOOLSETS,
  ENV_KINDS,
  NAME_PATTERN,
  ReadyCheckSchema,
  TurnSpecSchema,
  VerifierSchema,
  type BuiltinToolset,
  type EnvKind,
  type TurnSpec,
  type VerifierManifest,
} from './schema.js';
export { DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, extractBundleArchive, type ExtractOptions, type ExtractedBundle } from './archive.js';
export { END_TURN_TOOL, contextDir, envNameOf, loadBundle, readmeSummary, taskRow, toolSpecsOf, type LoadOptions, type LoadedBundle, type Task } from './loader.js';
export { EnvCatalog, unservedFeatures } from './env-catalog.js';
