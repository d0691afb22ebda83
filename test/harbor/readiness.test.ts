/**
 * Readiness hints the import reads from a Dockerfile (its last stage's ENTRYPOINT, CMD and
 * HEALTHCHECK) and the words the deploy uses for an image's HEALTHCHECK.
 */
import { describe, expect, it } from 'vitest';
import { startCommands } from '../../src/authoring/harbor/dockerfile.js';
import { dockerfileInstructions } from '../../src/sandbox/engine/image-build.js';
import { healthcheckCommand, notHealthyMessage } from '../../src/sandbox/docker/health.js';

const starts = (dockerfile: string) => startCommands(dockerfileInstructions(dockerfile));

describe('startCommands', () => {
  it("reads the last stage's ENTRYPOINT, a CMD that is not a bare shell, and whether it has a HEALTHCHECK", () => {
    expect(starts('FROM debian\nENTRYPOINT ["/entry.sh"]\nCMD ["bash"]\n')).toEqual({ entrypoint: '["/entry.sh"]', serviceCmd: null, healthcheck: false });
    expect(starts('FROM debian\nCMD python3 -m http.server\n')).toEqual({ entrypoint: null, serviceCmd: 'python3 -m http.server', healthcheck: false });
    expect(starts('FROM debian\nCMD ["/bin/bash", "-l"]\n').serviceCmd).toBeNull();
    expect(starts('FROM debian\nCMD ["sh", "-c", "nginx -g \'daemon off;\'"]\n').serviceCmd).toBe('["sh", "-c", "nginx -g \'daemon off;\'"]');
    expect(starts('FROM debian\nENTRYPOINT ["/e.sh"]\nHEALTHCHECK --interval=1s \\\n  CMD curl -f http://localhost/\n')).toMatchObject({ healthcheck: true });
    expect(starts('FROM debian\nHEALTHCHECK NONE\n').healthcheck).toBe(false);
  });

  it('forgets what an earlier stage set', () => {
    expect(starts('FROM golang AS build\nENTRYPOINT ["/go"]\nHEALTHCHECK CMD true\nFROM debian\nCOPY --from=build /x /x\n')).toEqual({
      entrypoint: null,
      serviceCmd: null,
      healthcheck: false,
    });
  });
});

describe("an image's HEALTHCHECK, as the deploy names it", () => {
  it('the command as written; none for NONE or no test', () => {
    expect(healthcheckCommand(['CMD-SHELL', 'curl -f http://localhost/ || exit 1'])).toBe('curl -f http://localhost/ || exit 1');
    expect(healthcheckCommand(['CMD', 'node', '-e', 'process.exit(0)'])).toBe('node -e process.exit(0)');
    expect(healthcheckCommand(['NONE'])).toBeNull();
    expect(healthcheckCommand(undefined)).toBeNull();
    expect(healthcheckCommand([])).toBeNull();
  });

  it('says why it did not pass and what its last run said', () => {
    const env = { name: 'svc', deployTimeoutMs: 4000 };
    expect(notHealthyMessage(env, { kind: 'not_healthy', why: 'timeout', check: 'curl -f x', status: 'starting', lastOutput: null })).toBe(
      "env `svc` was not ready: its image's HEALTHCHECK (curl -f x) did not pass (it was still starting when its deploy timeout (4 s) passed); the check had not run yet (its interval is longer than the deploy timeout?)",
    );
    expect(
      notHealthyMessage(env, { kind: 'not_healthy', why: 'unhealthy', check: 'curl -f x', status: 'unhealthy', lastOutput: 'exit code 7: refused' }),
    ).toMatch(/\(the engine marked it unhealthy\); its last run: exit code 7: refused$/);
  });
});
