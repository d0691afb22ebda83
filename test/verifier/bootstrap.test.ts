/**
 * The rule that tells a verifier that could not run its tests (src/verifier/bootstrap.ts) from
 * one whose tests ran and failed, in both directions, on outputs as the tools print them (the
 * standard Terminal-Bench test.sh's, offline, as it printed in a container on an internal network).
 */
import { describe, expect, it } from 'vitest';
import { bootstrapFailure, missingBootstrapTools, networkEvidence, testsRan } from '../../src/verifier/bootstrap.js';

/** the standard Harbor / Terminal-Bench test.sh */
const STANDARD_SCRIPT = `#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
`;

/** what it printed offline on openenv-local/debian:bookworm (no curl in the image) */
const OFFLINE_NO_CURL = `Ign:1 http://deb.debian.org/debian bookworm InRelease
Err:1 http://deb.debian.org/debian bookworm InRelease
  Temporary failure resolving 'deb.debian.org'
Reading package lists...
W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'
W: Some index files failed to download. They have been ignored, or old ones used instead.
Reading package lists...
Building dependency tree...
E: Unable to locate package curl
/tests/test.sh: line 4: curl: command not found
/tests/test.sh: line 5: /root/.local/bin/env: No such file or directory
/tests/test.sh: line 6: uvx: command not found
`;

/** an image with curl and uv: uvx itself fails to fetch pytest (no "command not found" anywhere) */
const OFFLINE_UVX_FETCH = `Err:1 http://deb.debian.org/debian bookworm InRelease
  Temporary failure resolving 'deb.debian.org'
curl is already the newest version (7.88.1-10+deb12u8).
curl: (6) Could not resolve host: astral.sh
  × Failed to resolve \`--with\` requirement
  ├─▶ Failed to fetch: \`https://pypi.org/simple/pytest/\`
  ├─▶ Request failed after 3 retries
  ╰─▶ dns error: failed to lookup address information: Temporary failure in name resolution
`;

/** pytest from the image ran after a failed apt-get update: the agent's work failed its tests */
const TESTS_RAN_AFTER_FETCH_FAILED = `Err:1 http://deb.debian.org/debian bookworm InRelease
  Temporary failure resolving 'deb.debian.org'
W: Some index files failed to download. They have been ignored, or old ones used instead.
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-8.4.1, pluggy-1.6.0
rootdir: /tests
collected 2 items

../tests/test_outputs.py F.                                              [100%]

=================================== FAILURES ===================================
______________________________ test_cli_runs ___________________________________
E   AssertionError: bash: line 1: mycli: command not found
=========================== short test summary info ============================
FAILED ../tests/test_outputs.py::test_cli_runs - AssertionError: bash: line 1: mycli: command not found
========================= 1 failed, 1 passed in 0.31s ==========================
`;

describe('a verifier that could not run its tests: verifier_failed', () => {
  it('the standard test.sh offline, no curl in the image: it wrote 0, its tools are missing, it needed the network', () => {
    const why = bootstrapFailure(OFFLINE_NO_CURL, STANDARD_SCRIPT, { reward: 0 });
    expect(why).toMatch(/test\.sh found no curl, \/root\/\.local\/bin\/env, uvx/);
    expect(why).toMatch(/; it needed the network \(Temporary failure resolving 'deb\.debian\.org' \/ W: Failed to fetch http/);
    expect(missingBootstrapTools(OFFLINE_NO_CURL)).toEqual(['curl', '/root/.local/bin/env', 'uvx']);
  });

  it('uvx present but it could not fetch pytest: a network failure, and test.sh runs pytest that never started', () => {
    expect(bootstrapFailure(OFFLINE_UVX_FETCH, STANDARD_SCRIPT, { reward: 0 })).toMatch(/^it needed the network \(.*Temporary failure resolving/);
    expect(missingBootstrapTools(OFFLINE_UVX_FETCH)).toEqual([]);
  });

  it('no reward file at all, and a fetch that failed: whatever test.sh runs', () => {
    const out = 'pip: Could not fetch URL https://pypi.org/simple/requests/: connection error\n';
    expect(bootstrapFailure(out, 'pip install requests\nnode /tests/check.js\n', null)).toMatch(/needed the network \(pip: Could not fetch URL/);
  });

  it('python -m pytest without pytest (pip install failed), reward.json all zeros', () => {
    const out = "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError(...)'\n/usr/bin/python3: No module named pytest\n";
    expect(bootstrapFailure(out, 'pip install pytest\npython3 -m pytest /tests\n', { reward: 0, style: 0 })).toMatch(
      /test\.sh found no pytest \(python -m\); it needed the network/,
    );
  });

  it('pytest missing offline with no network said at all (the image lacks the tool)', () => {
    expect(bootstrapFailure('/tests/test.sh: line 3: pytest: command not found\n', 'pytest /tests -q\n', { reward: 0 })).toBe('test.sh found no pytest');
  });
});

describe('a verifier whose tests ran: its reward stands', () => {
  it('tests ran and failed (pytest session) after a failed apt-get update: a real 0, even with "command not found" in a test', () => {
    expect(testsRan(TESTS_RAN_AFTER_FETCH_FAILED)).toBe(true);
    expect(bootstrapFailure(TESTS_RAN_AFTER_FETCH_FAILED, STANDARD_SCRIPT, { reward: 0 })).toBeNull();
  });

  it("the agent's program missing, as test.sh itself runs it: not a bootstrap tool, a real 0", () => {
    const out = '/tests/test.sh: line 7: /app/solution.sh: No such file or directory\n/tests/test.sh: line 9: mycli: command not found\n';
    expect(missingBootstrapTools(out)).toEqual([]);
    expect(bootstrapFailure(out, 'bash /app/solution.sh\nmycli --check\necho 0 > /logs/verifier/reward.txt\n', { reward: 0 })).toBeNull();
  });

  it("a network failure printed by the agent's program, in a test.sh that fetches nothing, is the agent's 0 (no reward, or pytest never started)", () => {
    const out = "curl: (6) Could not resolve host: example.com\nTemporary failure resolving 'deb.debian.org'\n";
    // test.sh builds the agent's work, then runs pytest: the build printed the lines and failed (set -e)
    expect(bootstrapFailure(out, 'set -e\nbash /app/build.sh\npython3 -m pytest /tests -q\n', { reward: 0 })).toBeNull();
    expect(bootstrapFailure(out, 'set -e\nbash /app/build.sh\npython3 -m pytest /tests -q\n', null)).toBeNull();
    // the same lines where test.sh itself fetches: its own fetch could not run
    expect(bootstrapFailure(out, 'set -e\napt-get update\nbash /app/build.sh\npython3 -m pytest /tests -q\n', null)).toMatch(/^it needed the network/);
  });

  it("a missing tool said by something other than test.sh's own shell (a test running the agent's script) is not test.sh's", () => {
    const out = 'bash: line 1: python3: command not found\n/app/run.sh: line 2: curl: command not found\n';
    expect(bootstrapFailure(out, 'bash /app/run.sh\n', { reward: 0 })).toBeNull();
  });

  it('a pass with noisy output (resolve failures, a missing optional tool) keeps its reward', () => {
    expect(bootstrapFailure(OFFLINE_NO_CURL, STANDARD_SCRIPT, { reward: 1 })).toBeNull();
    expect(bootstrapFailure(OFFLINE_UVX_FETCH, STANDARD_SCRIPT, { reward: 0.5 })).toBeNull();
  });

  it('a non-pytest test.sh that wrote 0 after a failed fetch, with its tools there: scored (its checks may have run)', () => {
    const out =
      "Err:1 http://deb.debian.org/debian bookworm InRelease\n  Temporary failure resolving 'deb.debian.org'\njq is already the newest version.\nmismatch in /app/out.json\n";
    expect(
      bootstrapFailure(out, 'apt-get update\napt-get install -y jq\njq . /app/out.json || echo 0 > /logs/verifier/reward.txt\n', { reward: 0 }),
    ).toBeNull();
  });

  it('a tool said missing that the container has (the server looked) is not missing: the 0 stands', () => {
    const out = '/tests/test.sh: line 3: pytest: command not found\n';
    expect(bootstrapFailure(out, 'pytest /tests -q\n', { reward: 0 }, new Set(['pytest']))).toBeNull();
    expect(bootstrapFailure(OFFLINE_NO_CURL, STANDARD_SCRIPT, { reward: 0 }, new Set(['curl']))).toMatch(/^test\.sh found no \/root\/\.local\/bin\/env, uvx;/);
  });

  it('a 0 with a quiet output is a 0', () => {
    expect(bootstrapFailure('FAILED\n', STANDARD_SCRIPT, { reward: 0 })).toBeNull();
    expect(networkEvidence('all good\n')).toBeNull();
  });
});
