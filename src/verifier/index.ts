/** Task verifiers (Harbor's tests/test.sh): run in the env's container after the agent, their reward files read as scores. */
export { ARTIFACTS_DIR, LOGS_DIR, REWARD_DIR, REWARD_JSON, REWARD_TXT, TESTS_DIR, TEST_SCRIPT, TEST_SCRIPT_NAME } from './layout.js';
export { REWARD_FILE_MAX_BYTES, REWARD_TXT_SCORE, parseRewardJson, parseRewardText, type RewardRead, type Scores } from './reward-files.js';
export {
  clearVerifierFiles,
  installTests,
  outputTail,
  prepareVerifierDirs,
  runVerifier,
  type VerifierOutcome,
  type VerifierRun,
  type VerifierSpec,
} from './verifier.js';
export { BOOTSTRAP_TOOLS, bootstrapFailure, fetchesIn, missingBootstrapTools, networkEvidence, testsRan } from './bootstrap.js';
export { TOOLCHAIN_PATHS, protectedPaths, rootAdditions, tamperedPaths, type ToolchainScope } from './toolchain.js';
export { DEFAULT_TURN_REWARD, TURN_REWARD_RULES, combineTurnScores, meetsMinReward, type MinReward, type TurnRewardRule } from './turns.js';
export { SETUP_SCRIPT, prepareTurn, type ReadyCheck, type TurnSetup, type TurnSetupResult } from './turn-setup.js';
export { ATIF_SCHEMA_VERSION, TRAJECTORY_FILE, TrajectoryLog, buildTrajectory, type AtifStep, type AtifTrajectory } from './trajectory.js';
