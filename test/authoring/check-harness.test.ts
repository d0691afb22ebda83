/**
 * The parts of checking a harness task that need no Docker: which harness check can script, the
 * golden solution as the shipped harness's bash calls (and what it cannot carry), the scripted
 * model's replies over HTTP (whole and streamed, with a usage), the option parsing of check's
 * --instance and --subnet-pool and eval's model options, the step bound derived from a task's
 * time budget, and a harness task's row.
 */
import { describe, expect, it } from 'vitest';
import { harnessRunNote, runsShippedHarness, scriptOf } from '../../src/authoring/check-harness.js';
import { nextCommand, SCRIPTED_DONE, ScriptedModel } from '../../src/authoring/scripted-model.js';
import type { Task } from '../../src/bundle/index.js';
import { checkCommand } from '../../src/cli/check.js';
import { evalCommand } from '../../src/cli/eval.js';
import { UsageError } from '../../src/cli/options.js';
import { MAX_STEPS, maxStepsFor } from '../../src/defaults.js';
import type { TaskRow } from '../../src/protocol/bundle.js';
import { promptRow, serverSettings } from '../../src/rows/build.js';
import { execFileSync } from 'node:child_process';

const task = (turns: string[]): Task => ({ turns }) as unknown as Task;

describe('which harness check can script', () => {
  it('the shipped harness, however it is started', () => {
    expect(runsShippedHarness(['sh', '-c', 'python3 /tmp/openenv/openenv_harness.py'])).toBe(true);
    expect(runsShippedHarness(['python3', '/tmp/openenv/openenv_harness.py', '--stream'])).toBe(true);
    expect(runsShippedHarness(['sh', '-c', 'claude -p "$(cat /tmp/openenv/instruction.md)"'])).toBe(false);
  });
});

describe("what check says of a harness's run", () => {
  const run = { turn: 1, running: false, elapsed_s: 3, model_calls: 2, model_tokens: 90, ended: 'exited' as const, exit_code: 0, output_tail: 'a\nb' };
  it('nothing for a run that exited 0; its end and output tail otherwise', () => {
    expect(harnessRunNote(run)).toBeNull();
    expect(harnessRunNote({ ...run, exit_code: 3 })).toBe("exited with 3 after 2 model call(s); its output's last lines:\n      a\n      b");
    expect(harnessRunNote({ ...run, ended: 'time_budget', exit_code: null, output_tail: '' })).toBe('ran out of its time budget after 2 model call(s)');
  });
});

describe('the golden solution as model replies', () => {
  it('bash, write_file and read_file become bash commands, turn by turn at each end_turn', () => {
    const s = scriptOf(task(['first', 'second']), [
      { tool: 'write_file', arguments: { path: '/solution/a b.txt', content: "it's\nhere" } },
      { tool: 'bash', arguments: { command: 'bash /solution/solve.sh', timeout_s: 900 } },
      { tool: 'end_turn' },
      { tool: 'read_file', arguments: { path: '/app/out.txt' } },
      { tool: 'end_turn' },
    ]);
    if ('cannot' in s) throw new Error(s.cannot);
    expect(s.turns.map((t) => t.instruction)).toEqual(['first', 'second']);
    expect(s.turns[0]!.commands).toHaveLength(2);
    expect(s.turns[0]!.commands[1]).toBe('bash /solution/solve.sh');
    expect(s.turns[1]!.commands).toEqual(["cat -- '/app/out.txt'"]);
    // the write_file command writes exactly the content, in a real shell
    const dir = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    const cmd = scriptOf(task(['t']), [{ tool: 'write_file', arguments: { path: `${dir}/x/it's.txt`, content: "a'b\n$HOME `x`\n" } }]);
    if ('cannot' in cmd) throw new Error(cmd.cannot);
    execFileSync('bash', ['-c', cmd.turns[0]!.commands[0]!]);
    expect(execFileSync('cat', [`${dir}/x/it's.txt`], { encoding: 'utf8' })).toBe("a'b\n$HOME `x`\n");
    execFileSync('rm', ['-rf', dir]);
  });

  it('a step of another tool, or past the last turn, cannot be scripted: said', () => {
    expect(scriptOf(task(['t']), [{ tool: 'submit', arguments: {} }])).toEqual({
      cannot: 'its step "submit" is not one the shipped harness can run (bash, write_file, read_file, end_turn)',
    });
    expect(scriptOf(task(['t']), [{ tool: 'end_turn' }, { tool: 'bash', arguments: { command: 'x' } }])).toHaveProperty('cannot');
  });

  it('the next command follows from the conversation alone: its instruction and the replies so far', () => {
    const script = { turns: [{ instruction: 'do it', commands: ['a', 'b'] }] };
    const conv = (assistant: number) => [
      { role: 'system', content: 'harness prompt' },
      { role: 'user', content: 'do it' },
      ...Array.from({ length: assistant }, () => [{ role: 'assistant' }, { role: 'tool', content: 'ok' }]).flat(),
    ];
    expect(nextCommand(script, conv(0))).toBe('a');
    expect(nextCommand(script, conv(1))).toBe('b');
    expect(nextCommand(script, conv(2))).toBeNull();
    expect(nextCommand(script, [{ role: 'user', content: 'another task' }])).toBeNull();
  });
});

describe('the scripted model over HTTP', () => {
  it('answers /models, a bash tool call then "done", whole and streamed, each with a usage; an unknown script is 404', async () => {
    const m = new ScriptedModel();
    await m.start();
    try {
      const base = m.add({ turns: [{ instruction: 'go', commands: ['echo hi'] }] });
      const models = (await (await fetch(`${base}/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((d) => d.id)).toEqual(['openenv-check-scripted']);
      const ask = (messages: unknown[], stream = false) =>
        fetch(`${base}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, stream }) });
      const first = (await (await ask([{ role: 'user', content: 'go' }])).json()) as any;
      expect(first.choices[0].message.tool_calls[0].function).toEqual({ name: 'bash', arguments: JSON.stringify({ command: 'echo hi' }) });
      expect(first.usage.prompt_tokens).toBeGreaterThan(0);
      expect(first.usage.total_tokens).toBe(first.usage.prompt_tokens + first.usage.completion_tokens);
      const second = (await (await ask([{ role: 'user', content: 'go' }, { role: 'assistant' }, { role: 'tool', content: 'hi' }])).json()) as any;
      expect(second.choices[0].message).toEqual({ role: 'assistant', content: SCRIPTED_DONE });
      const streamed = await (await ask([{ role: 'user', content: 'go' }], true)).text();
      expect(streamed).toContain('"tool_calls"');
      expect(streamed).toContain('"usage"');
      expect(streamed.trim().endsWith('data: [DONE]')).toBe(true);
      expect(m.calls).toBe(3);
      expect((await fetch(base.replace(/\/s\/\d+\//, '/s/999/') + '/models')).status).toBe(404);
    } finally {
      await m.close();
    }
  });
});

describe('check and eval options', () => {
  it('check takes --instance and --subnet-pool as serve declares them; no --instance: a check- name of its own', () => {
    const a = checkCommand.parse(['b', '--instance', 'mine-1', '--subnet-pool', '10.99.0.0/20']);
    expect(a.instance).toBe('mine-1');
    expect(a.subnetPool).toBe('10.99.0.0/20');
    expect(checkCommand.parse(['b']).instance).toBeUndefined();
    expect(() => checkCommand.parse(['b', '--instance', 'no spaces'])).toThrow(/--instance: expected letters, digits/);
    expect(() => checkCommand.parse(['b', '--subnet-pool', '10.99.0.0'])).toThrow(UsageError);
  });

  it('eval: --model-url and --model together, or neither (harness tasks only)', () => {
    expect(evalCommand.parse(['http://127.0.0.1:8200']).modelUrl).toBeUndefined();
    expect(evalCommand.parse(['http://127.0.0.1:8200', '--model-url', 'http://m/v1', '--model', 'p']).model).toBe('p');
    expect(() => evalCommand.parse(['http://127.0.0.1:8200', '--model', 'p'])).toThrow(/--model-url and --model go together/);
    expect(() => evalCommand.parse(['http://127.0.0.1:8200', '--model-url', 'http://m/v1'])).toThrow(/--model is required with --model-url/);
  });
});

describe('the step bound from a task time budget', () => {
  it(`${MAX_STEPS.calls} calls, or one per ${MAX_STEPS.secondsPerCall} s of the budget when more; --max-steps wins`, () => {
    expect(maxStepsFor({})).toBe(64);
    expect(maxStepsFor({ time_budget_s: 300 })).toBe(64);
    expect(maxStepsFor({ time_budget_s: 900 })).toBe(90);
    expect(maxStepsFor({ time_budget_s: 1800 })).toBe(180);
    expect(maxStepsFor({ time_budget_s: 1801 })).toBe(181);
    // no budget of its own: its turns' together, when every turn has one
    expect(maxStepsFor({ per_turn: [{ time_budget_s: 600 }, { time_budget_s: 900 }] })).toBe(150);
    expect(maxStepsFor({ per_turn: [{ time_budget_s: 6000 }, {}] })).toBe(64);
    expect(maxStepsFor({ time_budget_s: 1800 }, 10)).toBe(10);
  });
});

describe("a harness task's row", () => {
  it('harness: true, the one tool wait, the instruction without the bundle system prompt', () => {
    const row: TaskRow = {
      task_id: 't',
      split: 'train',
      index: 0,
      toolset: 'shell',
      messages: [
        { role: 'system', content: 'You have a bash tool…' },
        { role: 'user', content: 'Fix the median.' },
      ],
      turns: 1,
      max_turns: 1,
      groups: {},
      harness: true,
    };
    const settings = serverSettings('http://127.0.0.1:8200', { maxTurns: 4, toolTimeout: 60, resetTimeout: 600, modelTimeout: 600, tokenVar: null });
    const bash = { name: 'bash', description: 'run', input_schema: { type: 'object' } };
    const r = promptRow(row, [bash], settings);
    expect(r.messages).toEqual([{ role: 'user', content: 'Fix the median.' }]);
    expect(r.tools.map((t) => t.function.name)).toEqual(['wait']);
    expect(r.metadata).toMatchObject({ harness: true, tools: [r.tools[0]!.function] });
    const plain = promptRow({ ...row, harness: undefined }, [bash], settings);
    expect(plain.metadata.tools.map((t) => t.name)).toEqual(['bash', 'end_turn']);
    expect(plain.messages).toHaveLength(2);
    expect(plain.metadata).not.toHaveProperty('harness');
  });
});
