/**
 * The tasks whose tests fetch at run time (docs/harbor.md, "Tests that fetch"): the standard
 * Harbor test.sh installs curl with apt-get, uv with `curl … | sh`, and pytest with uvx, each
 * reaching the network when the verifier runs. Envs here have none, so such a verifier cannot
 * run its tests (the episode ends `verifier_failed`); the import names those tasks and what
 * their test.sh fetches (fetchesIn, the verifier's own reading of a script: src/verifier/bootstrap.ts).
 */
import path from 'node:path';
import { TEST_SCRIPT_NAME, fetchesIn } from '../../verifier/index.js';
import { readRegular } from './task-folder.js';
import type { TaskNote } from './task-config.js';

/**
 * The note for a task whose tests fetch: each turn's test.sh (the step's over the task's, as the
 * import merges them: the last folder holding one wins) read and scanned. `tests` are a task's
 * turns' test folders, in the import's order.
 */
export async function testsFetchNotes(turns: readonly { step: string | null; tests: readonly string[] }[]): Promise<TaskNote[]> {
  const found = new Set<string>();
  const fields = new Set<string>();
  for (const turn of turns) {
    for (const dir of [...turn.tests].reverse()) {
      const data = await readRegular(path.join(dir, TEST_SCRIPT_NAME));
      if (data === null) continue;
      const fetches = fetchesIn(data.toString('utf8'));
      for (const f of fetches) found.add(f);
      if (fetches.length > 0) fields.add(turn.step === null ? `tests/${TEST_SCRIPT_NAME}` : `steps/${turn.step}/tests/${TEST_SCRIPT_NAME} (or the task's)`);
      break;
    }
  }
  if (found.size === 0) return [];
  return [
    {
      field: [...fields].join(', '),
      message:
        `its tests fetch at run time (${[...found].join(', ')}): envs have no network here, so its verifier cannot run them and the episode ends verifier_failed; ` +
        'put what the tests need in the image (see docs/harbor.md#tests-that-fetch)',
    },
  ];
}
