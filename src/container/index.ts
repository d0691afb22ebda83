/**
 * Work inside an env's container, for the rooms above (the shell toolset, verifiers, harness
 * episodes): the server's own steps through the toolbox (run.ts), files as the agent's user
 * (files.ts), the agent's user resolved (users.ts), stopping the agent (stop.ts), bounded output,
 * a folder packed for the archive API.
 */
export { BoundedOutput, truncationMark, type BoundedText } from './bounded-output.js';
export { END_TAG, EndMarkerScanner, LineSplitter, PID_TAG, newNonce, type EndLine } from './end-marker.js';
export { FileToolError, readFileSlice, resolvePath, writeFileBytes, type FileSlice } from './files.js';
export { USER_COPY_MAX_BYTES, copyInAs, packFolder } from './pack.js';
export {
  NoToolboxError,
  killGroup,
  runKillable,
  runToEnd,
  runTrusted,
  signalGroup,
  toolboxOf,
  type Bounds,
  type KillableResult,
  type RunResult,
  type TrustedOptions,
  type TrustedRun,
} from './run.js';
export { AgentIntervals, containerClock, parseRows, startTimeOf, stopAgentProcesses, type ClockMark, type ProcessRow, type StopResult } from './stop.js';
export { AgentUser, resolveUser, type NumericUser } from './users.js';
export { entryKind, readArchivedPath, type ArchivedPath, type EntryKind } from './archive-read.js';
