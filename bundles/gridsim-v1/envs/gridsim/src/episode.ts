/** One GridSim episode: the tools' behaviour, free of HTTP, so it is tested directly too. */
import { formatPrice, formatUsd, moneyToUsd, simulate, type Simulation } from './physics.js';
import { parseSchedule } from './schedule.js';
import { scoreMillionths } from './score.js';
import { situationText, type Task } from './task.js';
import { MAX_CHECKS, TOOLS } from './tools.js';

/** What `/tools/call` answers (the env contract, docs/bundle-format.md). */
export interface ToolReply {
  result: unknown;
  text: string;
  is_error: boolean;
  done: boolean;
  scores?: Record<string, number>;
}

export const SCORE_NAME = 'schedule';

interface Submission {
  feasible: boolean;
  profit: number;
  score: number;
}

function errorReply(text: string): ToolReply {
  return { result: { error: text }, text, is_error: true, done: false };
}

function traceRows(sim: Simulation) {
  return sim.trace.map((t) => ({
    hour: t.hour,
    price: t.price_cents / 100,
    action: t.action,
    charge_after: t.soc,
    cash_flow: moneyToUsd(t.cash),
  }));
}

function traceTable(sim: Simulation): string[] {
  const lines = ['| HE | price $/MWh | action | charge after | cash flow |', '|---|---|---|---|---|'];
  for (const t of sim.trace) {
    const action = t.action > 0 ? `+${t.action}` : String(t.action);
    lines.push(`| ${String(t.hour).padStart(2, '0')} | ${formatPrice(t.price_cents)} | ${action} | ${t.soc} | ${formatUsd(t.cash)} |`);
  }
  return lines;
}

export class Episode {
  private checksUsed = 0;
  private submission: Submission | null = null;
  private finished = false;

  constructor(
    readonly taskId: string,
    readonly task: Task,
    readonly seed: number | null = null,
  ) {}

  get done(): boolean {
    return this.finished || this.submission !== null;
  }

  call(name: string, args: unknown): ToolReply {
    if (!TOOLS.some((t) => t.name === name)) {
      return errorReply(`unknown tool ${JSON.stringify(name)}; the tools are ${TOOLS.map((t) => t.name).join(', ')}`);
    }
    if (this.done) {
      // Refused, and still done with the score that stands, so a caller that missed the end
      // learns it with valid scores.
      const text = this.submission
        ? `refused: a schedule was already submitted and graded (score ${this.submission.score}); the episode is over and ${name} cannot be used any more`
        : `refused: the episode has ended; ${name} cannot be used any more`;
      return { result: { error: text }, text, is_error: true, done: true, scores: this.finish().scores };
    }
    if (args === undefined || args === null) args = {};
    if (typeof args !== 'object' || Array.isArray(args)) {
      return errorReply('arguments must be a JSON object, e.g. {"schedule": [0, 0, ...]}');
    }
    const a = args as Record<string, unknown>;
    // the schemas say additionalProperties: false; a misspelt field is the model's to hear about
    const unknown = Object.keys(a).filter((k) => name === 'get_situation' || k !== 'schedule');
    if (unknown.length > 0) {
      const takes = name === 'get_situation' ? 'takes no arguments' : 'takes only "schedule"';
      return errorReply(`unknown argument(s) ${unknown.map((k) => JSON.stringify(k)).join(', ')}: ${name} ${takes}`);
    }
    if (name === 'get_situation') {
      const text = situationText(this.task);
      return { result: { situation: text }, text, is_error: false, done: false };
    }
    if (!('schedule' in a)) {
      return errorReply(`missing argument "schedule": an array of 24 integers, e.g. {"schedule": [0, 0, ...]}`);
    }
    if (name === 'check_schedule') return this.check(a.schedule);
    return this.submit(a.schedule);
  }

  private check(input: unknown): ToolReply {
    if (this.checksUsed >= MAX_CHECKS) {
      return errorReply(
        `refused: check_schedule can be used at most ${MAX_CHECKS} times per episode and all ${MAX_CHECKS} are used; submit your schedule with submit_schedule`,
      );
    }
    const parsed = parseSchedule(input, this.task.data.battery);
    if (!parsed.ok) return errorReply(`malformed schedule (no check used): ${parsed.error}`);
    this.checksUsed += 1;
    const sim = simulate(this.task.b, this.task.pricesCents, parsed.schedule);
    const left = MAX_CHECKS - this.checksUsed;
    const b = this.task.b;
    const lines = [
      `Check ${this.checksUsed} of ${MAX_CHECKS} (${left} left). Nothing is submitted by a check.`,
      '',
      ...traceTable(sim),
      '',
      `Units sold: ${sim.unitsSold} of ${b.cycleCap} allowed. Charge at the end: ${sim.finalSoc} (at least ${b.sEndMin} required).`,
      `Total profit: ${formatUsd(sim.profit)}`,
      sim.violation ? `Feasible: no. First rule broken: ${sim.violation.message}. (A schedule that breaks a rule scores 0 when submitted.)` : 'Feasible: yes.',
    ];
    return {
      result: {
        check: this.checksUsed,
        checks_left: left,
        feasible: sim.violation === null,
        violation: sim.violation,
        hours: traceRows(sim),
        units_sold: sim.unitsSold,
        final_charge: sim.finalSoc,
        total_profit: moneyToUsd(sim.profit),
      },
      text: lines.join('\n'),
      is_error: false,
      done: false,
    };
  }

  private submit(input: unknown): ToolReply {
    const parsed = parseSchedule(input, this.task.data.battery);
    if (!parsed.ok) return errorReply(`malformed schedule (nothing submitted): ${parsed.error}`);
    const sim = simulate(this.task.b, this.task.pricesCents, parsed.schedule);
    const feasible = sim.violation === null;
    const score = feasible ? scoreMillionths(sim.profit, this.task.optimum) / 1_000_000 : 0;
    this.submission = { feasible, profit: sim.profit, score };
    const text = feasible
      ? `Schedule submitted and graded: profit ${formatUsd(sim.profit)}, score ${score}. The episode is over.`
      : `Schedule submitted and graded: it breaks a rule (${sim.violation?.message}), so it scores 0. The episode is over.`;
    return {
      result: {
        submitted: true,
        feasible,
        violation: sim.violation,
        total_profit: moneyToUsd(sim.profit),
        score,
      },
      text,
      is_error: false,
      done: true,
      scores: { [SCORE_NAME]: score },
    };
  }

  /** The episode ends now: the submitted schedule's score, or 0 when nothing was submitted. */
  finish(): { scores: Record<string, number> } {
    this.finished = true;
    return { scores: { [SCORE_NAME]: this.submission ? this.submission.score : 0 } };
  }

  state(): Record<string, unknown> {
    return {
      task_id: this.taskId,
      seed: this.seed,
      checks_used: this.checksUsed,
      checks_left: MAX_CHECKS - this.checksUsed,
      submitted: this.submission !== null,
      score: this.submission ? this.submission.score : null,
      done: this.done,
    };
  }
}
