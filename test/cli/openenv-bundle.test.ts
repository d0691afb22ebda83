/** The `openenv-bundle` dispatcher: the command list, per-command help, exit codes for mistakes. */
import { describe, expect, it } from 'vitest';
import { cli } from '../../src/cli/openenv-bundle.js';
import { SUBCOMMANDS } from '../../src/cli/commands.js';

function bufferIo() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) }, env: {} },
    out: () => out.join(''),
    err: () => err.join(''),
  };
}

describe('openenv-bundle', () => {
  it('lists every subcommand under --help and exits 0', async () => {
    const b = bufferIo();
    expect(await cli(['--help'], b.io)).toBe(0);
    for (const c of SUBCOMMANDS) expect(b.out()).toContain(`  ${c.name} `);
  });

  it('prints the overview to stderr and exits 2 without a command', async () => {
    const b = bufferIo();
    expect(await cli([], b.io)).toBe(2);
    expect(b.err()).toContain('Usage: openenv-bundle <command>');
  });

  it('names an unknown command and exits 2', async () => {
    const b = bufferIo();
    expect(await cli(['serv'], b.io)).toBe(2);
    expect(b.err()).toContain("unknown command 'serv'");
  });

  it.each(SUBCOMMANDS.map((c) => c.name))('%s --help prints its own usage under its own name', async (name) => {
    const b = bufferIo();
    expect(await cli([name, '--help'], b.io)).toBe(0);
    expect(b.out()).toContain(`Usage: openenv-bundle ${name}`);
    const again = bufferIo();
    expect(await cli(['help', name], again.io)).toBe(0);
    expect(again.out()).toBe(b.out());
  });

  it('rows keeps its exit code for a command line to fix', async () => {
    const b = bufferIo();
    expect(await cli(['rows', 'not-a-url', 'out'], b.io)).toBe(2);
    expect(b.err()).toContain('URL must');
  });
});
