/** The shell toolset's suite (shell-suite.ts) under runc, the engine's default runtime. */
import { describeShellToolset } from './shell-suite.js';

describeShellToolset('runc');
