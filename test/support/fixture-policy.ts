/** A scripted model's golden play of the fixture bundle's tasks (test/fixtures/fixture-v1), read from each task's prompt. */
import { firstPrompt, turnsTaken, type Policy } from './scripted-model.js';

/** The fixture's golden play, read from each task's prompt: echo then end_turn, fail then a plain reply, finish_now with its score. */
export const fixtureGolden: Policy = (req) => {
  const prompt = firstPrompt(req);
  const turn = turnsTaken(req);
  const echo = /^Echo the word (\w+), then end your turn\.$/.exec(prompt);
  if (echo) return turn === 0 ? { tool_calls: [{ name: 'echo', arguments: { text: echo[1] } }] } : { tool_calls: [{ name: 'end_turn', arguments: {} }] };
  const fail = /^Call fail with the message (\w+), then end your turn\.$/.exec(prompt);
  // a reply without a tool call ends the turn
  if (fail) return turn === 0 ? { tool_calls: [{ name: 'fail', arguments: { message: fail[1] } }] } : { content: 'I called it.' };
  const finish = /^Call finish_now with score ([\d.]+)\.$/.exec(prompt);
  if (finish) return { tool_calls: [{ name: 'finish_now', arguments: { score: Number(finish[1]) } }] };
  return { tool_calls: [{ name: 'end_turn', arguments: {} }] };
};
