/** The built-in shell toolset: bash, read_file and write_file in any env's container (docs/harbor.md). */
export {
  ContainerGoneError,
  PATH_MODE,
  pathKind,
  type ContainerExec,
  type ExecProcess,
  type ExecRequest,
  type OutputHandlers,
  type PathStat,
} from '../../sandbox/container-exec.js';
export { DockerContainerExec, FrameDemuxer } from '../../sandbox/docker/index.js';
export { ShellStartError, encodeCommand, type ShellLimits, type ShellSettings, type ShellStartFailure } from './shell-process.js';
export { ShellSession, type ShellRun } from './shell-session.js';
export { BASH_TOOL, READ_FILE_TOOL, SHELL_BUILTIN, SHELL_SYSTEM_PROMPT, SHELL_TOOL_NAMES, SHELL_TOOL_SPECS, WRITE_FILE_TOOL } from './specs.js';
export { ShellToolset, bashText, type ShellToolOutcome, type ShellToolReply } from './toolset.js';
