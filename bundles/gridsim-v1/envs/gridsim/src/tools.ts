/** The toolset `gridsim`, shared by every task: names, descriptions and JSON schemas. */

export interface ToolSpec {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export const MAX_CHECKS = 3;

const SCHEDULE_SCHEMA = {
  type: 'array',
  description:
    '24 integers, one per hour ending 1 to 24: a positive number charges (buys) that many units, a negative number sells that many units, 0 idles. Each must lie within [-k_dis, +k_ch] of the battery given in the situation.',
  items: { type: 'integer' },
  minItems: 24,
  maxItems: 24,
};

export const TOOLS: readonly ToolSpec[] = [
  {
    name: 'get_situation',
    description:
      "Returns this episode's situation as text: the date, the settlement point, the battery table, the 24 day-ahead prices and the rules (the same as in the first message). Takes no arguments.",
    input_schema: { type: 'object', properties: {}, additionalProperties: false },
  },
  {
    name: 'check_schedule',
    description: `Simulates a schedule without submitting it. Returns, hour by hour, the action, the charge held after the hour (units) and the cash flow ($), then the units sold, the total profit, and the first rule the schedule breaks (with its hour) if it breaks one. It does not grade the schedule. At most ${MAX_CHECKS} uses per episode; a malformed schedule (not 24 integers within the battery's bounds) is reported as an error and does not use one up.`,
    input_schema: { type: 'object', properties: { schedule: SCHEDULE_SCHEMA }, required: ['schedule'], additionalProperties: false },
  },
  {
    name: 'submit_schedule',
    description:
      "Submits your final schedule and ends the episode. It is graded once against the best schedule of the day: the best scores 1, idling all day 0.2, a schedule that breaks a rule 0. A malformed schedule (not 24 integers within the battery's bounds) is reported as an error and nothing is submitted. Once a schedule is submitted, later calls are refused.",
    input_schema: { type: 'object', properties: { schedule: SCHEDULE_SCHEMA }, required: ['schedule'], additionalProperties: false },
  },
];
