/** Task verifiers (Harbor's tests/test.sh): run in the env's container after the agent, their reward files read as scores. */
export { ARTIFACTS_DIR, REWARD_DIR, REWARD_JSON, REWARD_TXT, TESTS_DIR, TEST_SCRIPT, TEST_SCRIPT_NAME } from './layout.js';
export { REWARD_TXT_SCORE, parseRewardJson, parseRewardText, type RewardRead, type Scores } from './reward-files.js';
export { installTests, outputTail, runVerifier, type VerifierOutcome, type VerifierRun, type VerifierSpec } from './verifier.js';
export { DEFAULT_TURN_REWARD, TURN_REWARD_RULES, combineTurnScores, meetsMinReward, type MinReward, type TurnRewardRule } from './turns.js';
export { SETUP_SCRIPT, prepareTurn, type ReadyCheck, type TurnSetup, type TurnSetupResult } from './turn-setup.js';
export { packFolder } from './pack.js';
export { AgentIntervals, containerClock, startTimeOf, stopAgentProcesses, type ContainerClock } from './stop-agent.js';
