/**
 * The options of how a rollout plays an episode, declared once for the two commands that take
 * them: `rows` records them in each row for slime's generate function, `eval` plays that way
 * itself. Also the value types those commands share (a server URL, a variable's name).
 */
import { z } from 'zod';
import type { OptionTable } from '../config.js';
import type { RolloutSettings } from '../rows/build.js';

/** An http(s):// address, trailing slashes dropped; `what` names it in the message. */
export const httpUrl = (what: string, example: string) =>
  z
    .string()
    .url(`${what} must be an http:// or https:// address, e.g. ${example}`)
    .refine((u) => /^https?:\/\//i.test(u), `${what} must start with http:// or https://`)
    .transform((u) => u.replace(/\/+$/, ''));

/** The name of an environment variable (never its value: a token in a flag would show in `ps`). */
export const variableName = (flag: string) =>
  z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, `--${flag} must be an environment variable name such as AGENTENV_TOKEN`)
    .optional();

const seconds = (def: number) => z.coerce.number().positive().finite().default(def);

export const ROLLOUT_OPTIONS = {
  maxTurns: {
    schema: z.coerce.number().int().positive().default(4),
    value: 'N',
    help: "model replies a rollout may ask for, one chat completion each; past them the task's remaining turns end empty and the env scores what was done (not a task's max_turns, which bounds its prompts)",
  },
  toolTimeout: { schema: seconds(60), value: 'S', help: 'seconds a rollout waits for one tool call' },
  resetTimeout: { schema: seconds(600), value: 'S', help: 'seconds a rollout waits for a slot and a deploy' },
  modelTimeout: { schema: seconds(600), value: 'S', help: 'seconds a rollout waits for the model' },
  tokenVar: {
    schema: variableName('token-var'),
    value: 'NAME',
    help: "the environment variable holding the server's token: the token is read from it, and only its name is ever written down",
    shownDefault: 'no token',
  },
} satisfies OptionTable;

/** The rollout settings as parsed, for the library. */
export function rolloutSettings(a: { maxTurns: number; toolTimeout: number; resetTimeout: number; modelTimeout: number; tokenVar?: string }): RolloutSettings {
  return { maxTurns: a.maxTurns, toolTimeout: a.toolTimeout, resetTimeout: a.resetTimeout, modelTimeout: a.modelTimeout, tokenVar: a.tokenVar ?? null };
}

/** The value of the variable a `--NAME-var` option names; unset or empty is an error naming both (exit 1). */
export function secretFrom(variable: string | undefined, env: NodeJS.ProcessEnv, flag: string): string | null {
  if (variable === undefined) return null;
  const v = env[variable];
  if (!v) throw new Error(`--${flag} ${variable}: the environment variable ${variable} is not set or empty`);
  return v;
}
