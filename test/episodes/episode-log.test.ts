import { describe, expect, it } from 'vitest';
import { deployedLine, toolCallFields } from '../../src/episodes/episode-log.js';

describe('episode log lines', () => {
  it("a tool call's fields: argument bytes, time, error", () => {
    const ok = {
      observation: { tool_name: 'echo', result: { content: [], structured_content: null, data: null, is_error: false }, error: null },
      reward: null,
      done: false,
    };
    expect(toolCallFields({ type: 'call_tool', tool_name: 'echo', arguments: { a: 'b' } }, ok, 12, 3)).toEqual({
      event: 'tool_call',
      tool: 'echo',
      arg_bytes: 9,
      ms: 12,
      is_error: false,
      step: 3,
      done: false,
    });
    const refused = {
      observation: { tool_name: 'echo', result: null, error: { error_type: 'invalid_args' as const, message: 'no' } },
      reward: null,
      done: false,
    };
    expect(toolCallFields({ type: 'call_tool', tool_name: 'echo' }, refused, 0, 1)).toMatchObject({ arg_bytes: 2, is_error: true, error_type: 'invalid_args' });
  });

  it("the deploy's line, for an env deployed for it or taken from the pool", () => {
    expect(deployedLine(1500, null)).toEqual([{ event: 'deployed', deploy_s: 1.5 }, 'env deployed']);
    expect(deployedLine(20, { envId: 'pool-1', waitedMs: 5 })).toEqual([
      { event: 'deployed', deploy_s: 0.02, pooled: true, env_id: 'pool-1', pool_wait_s: 0.005 },
      'env taken from the warm pool',
    ]);
  });
});
