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
