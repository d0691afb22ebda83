/** Where a verified task's files are in the env's container (Harbor's layout). */
export const TESTS_DIR = '/tests';
/** the verifier's entry point, in a task's tests folder */
export const TEST_SCRIPT_NAME = 'test.sh';
export const TEST_SCRIPT = `${TESTS_DIR}/${TEST_SCRIPT_NAME}`;
export const LOGS_DIR = '/logs';
export const REWARD_DIR = `${LOGS_DIR}/verifier`;
export const REWARD_TXT = `${REWARD_DIR}/reward.txt`;
export const REWARD_JSON = `${REWARD_DIR}/reward.json`;
export const ARTIFACTS_DIR = `${LOGS_DIR}/artifacts`;
/**
 * Where the verifier's Python keeps its bytecode (PYTHONPYCACHEPREFIX, Python 3.8 and later): never
 * `__pycache__/`, which the agent could have filled with bytecode of its own for the standard
 * library (the toolchain check leaves those out). In the fresh /tests, which nothing of the agent's saw.
 */
export const PYCACHE_PREFIX = `${TESTS_DIR}/.pycache`;
