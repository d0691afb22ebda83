/**
 * The web console's data, as documented, authenticated JSON routes any client can use:
 *
 *   GET /console/overview            gauges (envs running / cap, resets waiting, deploys in flight)
 *                                    and per-minute series over the last hour
 *   GET /console/episodes            live episodes and the last N ended ones (filterable)
 *   GET /console/episodes/:id        one episode's transcript (live or kept)
 *   GET /console/tasks               a split's task ids, searchable (GET /tasks/:task_id has the rest)
 *   GET /console/stream              NDJSON over a plain streaming response: a snapshot, then
 *                                    every change as it happens, and the overview every second
 *
 * The stream is read with fetch() and its Authorization header (not EventSource, which cannot
 * send one): no token ever goes in a URL.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { LoadedBundle } from '../bundle/index.js';
import { NotFoundError } from '../errors.js';
import type { Admission } from '../episodes/admission.js';
import type { EpisodeHistory, HistoryMessage } from '../episodes/history.js';
import type { EpisodeRecorder } from '../episodes/recorder.js';

export interface ConsoleRouteOptions {
  bundle: LoadedBundle;
  history: EpisodeHistory;
  admission: Admission;
  recorder: EpisodeRecorder | null;
  isDraining: () => boolean;
  /** how often the stream sends the overview (ms) */
  tickMs?: number;
}

/** a stream whose client reads slower than this many buffered bytes is cut (it may reconnect) */
const MAX_STREAM_BUFFER = 4 * 1024 * 1024;

// ---- JSON Schemas (fastify validates the query with them; /openapi.json shows them) ----------

const nullable = (type: string) => ({ type: [type, 'null'] });
const timings = {
  type: 'object',
  properties: { queued_s: { type: 'number' }, deploy_s: { type: 'number' }, running_s: { type: 'number' } },
};
const PHASES = ['waiting', 'deploying', 'running', 'done'];
const END_REASONS = ['finished', 'turns_ended', 'max_steps', 'env_failed', 'closed'];
const summary = {
  type: 'object',
  description: 'an episode in a line',
  properties: {
    episode_id: { type: 'string' },
    client_label: { ...nullable('string'), description: "the reset's own episode_id label" },
    task_id: { type: 'string' },
    split: { type: 'string' },
    index: { type: 'integer' },
    transport: { enum: ['ws', 'http', 'mcp'] },
    phase: { enum: PHASES },
    created_at: { type: 'string', format: 'date-time' },
    ended_at: { type: ['string', 'null'], format: 'date-time' },
    steps: { type: 'integer' },
    turn: { type: 'integer' },
    last_tool: nullable('string'),
    end_reason: { enum: [...END_REASONS, null] },
    reward: nullable('number'),
    failure_reason: nullable('string'),
    timings,
  },
};
const transcriptEvent = {
  type: 'object',
  description:
    'kind reset: {messages, tools, turns, max_turns}; tool_call: {step, turn, tool_name, arguments, result, error, ms} (end_turn is a tool call); list_tools: {ms}; end: {end_reason, reward, scores, failure (with log_tail), timings}. Every event has `at`.',
  required: ['kind', 'at'],
  additionalProperties: true,
  properties: { kind: { enum: ['reset', 'tool_call', 'list_tools', 'end'] }, at: { type: 'string', format: 'date-time' } },
};
const transcript = {
  type: 'object',
  description: 'what the model saw and sent, and how the episode ended; never the token nor the task\'s hidden data',
  additionalProperties: true,
  properties: {
    ...summary.properties,
    toolset: { type: 'string' },
    seed: nullable('integer'),
    scores: { type: ['object', 'null'], additionalProperties: { type: 'number' } },
    failure: { type: ['object', 'null'], additionalProperties: true },
    events_dropped: { type: 'integer' },
    events: { type: 'array', items: transcriptEvent },
  },
};
const statSeries = {
  type: 'object',
  properties: {
    count: { type: 'array', items: { type: 'integer' } },
    mean: { type: 'array', items: nullable('number') },
    max: { type: 'array', items: nullable('number') },
  },
};
const countsByKey = { type: 'object', additionalProperties: { type: 'array', items: { type: 'integer' } } };
const series = {
  type: 'object',
  description: 'per-minute buckets over the last hour, oldest first (t: unix seconds of each bucket start)',
  properties: {
    bucket_s: { type: 'integer' },
    t: { type: 'array', items: { type: 'number' } },
    episodes_ended: { type: 'array', items: { type: 'integer' } },
    deploy_s: statSeries,
    queue_wait_s: statSeries,
    failures: { ...countsByKey, description: 'failure reason → episodes per bucket' },
    end_reasons: { ...countsByKey, description: 'end reason → episodes per bucket' },
    rewards: {
      type: 'object',
      description: 'over the hour, per split: counts in [<0, 0–0.1, …, 0.9–1 (1 included), >1]',
      properties: {
        edges: { type: 'array', items: { type: 'number' } },
        by_split: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            properties: { counts: { type: 'array', items: { type: 'integer' } }, n: { type: 'integer' }, mean: { type: 'number' } },
          },
        },
      },
    },
  },
};
const overview = {
  type: 'object',
  properties: {
    at: { type: 'string', format: 'date-time' },
    capacity: { type: 'integer', description: '--max-concurrent-envs' },
    running: { type: 'integer', description: 'env slots held (deploying, running or tearing down)' },
    waiting: { type: 'integer', description: 'resets waiting for a slot' },
    deploying: { type: 'integer', description: 'deploys in flight' },
    live: { type: 'integer', description: 'episodes not ended (waiting, deploying or running)' },
    draining: { type: 'boolean' },
    history: {
      type: 'object',
      properties: { kept: { type: 'integer' }, size: { type: 'integer', description: '--history' }, bytes: { type: 'integer' } },
    },
    recorder: {
      type: ['object', 'null'],
      description: '--record: lines written, dropped (queue full) and failed',
      properties: { dir: { type: 'string' }, written: { type: 'integer' }, dropped: { type: 'integer' }, failed: { type: 'integer' }, queued: { type: 'integer' } },
    },
    series,
  },
};
const errorBody = { type: 'object', properties: { error: { type: 'string' }, message: { type: 'string' } } };
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', description: 'the episode_id' } } };

const episodesQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    split: { type: 'string', minLength: 1, description: 'only this split (live and ended)' },
    end_reason: { enum: END_REASONS, description: 'only ended episodes with this end reason' },
    failed: { type: 'boolean', description: 'true: only ended episodes with a failure; false: only those without' },
    failure_reason: { type: 'string', minLength: 1, description: 'only ended episodes that failed for this reason' },
    task: { type: 'string', minLength: 1, description: 'only task ids containing this' },
    offset: { type: 'integer', minimum: 0, default: 0, description: 'of the ended episodes (newest first)' },
    limit: { type: 'integer', minimum: 1, maximum: 10000, default: 100, description: 'ended episodes per page' },
  },
};
interface EpisodesQuery {
  split?: string;
  end_reason?: string;
  failed?: boolean;
  failure_reason?: string;
  task?: string;
  offset: number;
  limit: number;
}

export async function consoleRoutes(app: FastifyInstance, opts: ConsoleRouteOptions): Promise<void> {
  const { bundle, history, admission, recorder } = opts;
  const tickMs = opts.tickMs ?? 1000;
  const streams = new Set<ServerResponse>();

  const gauges = () => ({
    at: new Date().toISOString(),
    capacity: admission.capacity,
    running: admission.activeCount,
    waiting: admission.waitingCount,
    deploying: history.liveCount('deploying'),
    live: history.liveCount(),
    draining: opts.isDraining(),
    history: { kept: history.endedCount, size: history.size, bytes: history.endedBytesApprox },
    recorder: recorder ? recorder.stats() : null,
  });
  const overviewNow = () => ({ ...gauges(), series: history.series() });

  app.get(
    '/console/overview',
    {
      schema: {
        summary: 'Console: gauges and per-minute series over the last hour',
        description: 'Envs running and the cap, resets waiting, deploys in flight; deploy latency, queue wait, episodes ended, failures by reason per minute, and the reward distribution per split over the last hour.',
        response: { 200: overview },
      },
    },
    async () => overviewNow(),
  );

  app.get<{ Querystring: EpisodesQuery }>(
    '/console/episodes',
    {
      schema: {
        summary: 'Console: live episodes and the last --history ended ones',
        querystring: episodesQuery,
        response: {
          200: {
            type: 'object',
            properties: {
              live: { type: 'array', items: summary },
              ended: { type: 'array', items: summary, description: 'newest first' },
              ended_total: { type: 'integer', description: 'ended episodes kept that match the filter' },
              history_size: { type: 'integer' },
            },
          },
          400: errorBody,
        },
      },
    },
    async (req) => {
      const q = req.query;
      const live = history.liveSummaries().filter((s) => (q.split === undefined || s.split === q.split) && (q.task === undefined || s.task_id.includes(q.task)));
      const ended = history.endedSummaries(q);
      return { live, ended: ended.episodes, ended_total: ended.total, history_size: history.size };
    },
  );

  app.get<{ Querystring: { split?: string; q?: string; offset: number; limit: number } }>(
    '/console/tasks',
    {
      schema: {
        summary: "Console: a split's tasks in a line each, searchable by task id",
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            split: { type: 'string', minLength: 1, description: 'default: the default split' },
            q: { type: 'string', description: 'only task ids containing this (case-insensitive)' },
            offset: { type: 'integer', minimum: 0, default: 0 },
            limit: { type: 'integer', minimum: 1, maximum: 1000, default: 50 },
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              split: { type: 'string' },
              splits: { type: 'object', additionalProperties: { type: 'integer' }, description: 'every split and its task count' },
              total: { type: 'integer', description: 'tasks that match' },
              offset: { type: 'integer' },
              tasks: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { task_id: { type: 'string' }, index: { type: 'integer' }, toolset: { type: 'string' }, turns: { type: 'integer' }, max_turns: { type: 'integer' } },
                },
              },
            },
          },
          404: errorBody,
        },
      },
    },
    async (req) => {
      const split = req.query.split ?? bundle.manifest.default_split;
      const tasks = bundle.splits[split];
      if (!tasks) throw new NotFoundError(`unknown split "${split}"; splits: ${Object.keys(bundle.splits).join(', ')}`);
      const q = req.query.q?.toLowerCase();
      const match = q ? tasks.filter((t) => t.task_id.toLowerCase().includes(q)) : tasks;
      const page = match.slice(req.query.offset, req.query.offset + req.query.limit);
      return {
        split,
        splits: bundle.splitCounts,
        total: match.length,
        offset: req.query.offset,
        tasks: page.map((t) => ({ task_id: t.task_id, index: t.index, toolset: t.toolset, turns: t.turns.length, max_turns: t.max_turns })),
      };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { download?: boolean } }>(
    '/console/episodes/:id',
    {
      schema: {
        summary: "Console: an episode's transcript (live or kept)",
        description: 'The reset prompt, every tool call with its arguments and result, turn ends (end_turn calls), and the end: scores, reward, timings or the failure with its log tail.',
        params: idParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { download: { type: 'boolean', description: 'answer as an attachment, episode-<id>.json' } },
        },
        response: { 200: transcript, 404: errorBody },
      },
    },
    async (req, reply) => {
      const t = history.transcript(req.params.id);
      if (!t) throw new NotFoundError(`no episode "${req.params.id}" in the console's history (live, or among the last ${history.size} ended)`);
      if (req.query.download) reply.header('content-disposition', `attachment; filename="episode-${t.episode_id}.json"`);
      return t;
    },
  );

  app.get<{ Querystring: { episode?: string } }>(
    '/console/stream',
    {
      schema: {
        summary: 'Console: live updates as NDJSON (one JSON object per line)',
        description:
          'A long response, read with fetch and the Authorization header. First {"type":"snapshot","overview":…,"live":[…]} (and, with ?episode=<id>, {"type":"transcript","transcript":…}); then {"type":"episode","episode":<summary>} on every change of any episode, {"type":"event","episode_id":…,"event":…} for each new transcript event of the watched episode, and {"type":"overview","overview":…} every second.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { episode: { type: 'string', minLength: 1, description: "also stream this episode's transcript events" } },
        },
        response: {
          200: { description: 'newline-delimited JSON', content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
          404: errorBody,
        },
      },
    },
    async (req: FastifyRequest<{ Querystring: { episode?: string } }>, reply: FastifyReply) => {
      const watched = req.query.episode;
      const first = watched === undefined ? undefined : history.transcript(watched);
      if (watched !== undefined && !first) throw new NotFoundError(`no episode "${watched}" in the console's history`);
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-cache, no-store',
        // nginx and other proxies: pass each line on as it comes
        'x-accel-buffering': 'no',
        'x-content-type-options': 'nosniff',
      });
      let closed = false;
      let unsubscribe = () => {};
      let timer: NodeJS.Timeout | null = null;
      const stop = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        if (timer) clearInterval(timer);
        streams.delete(res);
      };
      const send = (m: unknown) => {
        if (closed) return;
        if (res.writableLength > MAX_STREAM_BUFFER) {
          req.log.warn({ event: 'console_stream_slow' }, 'a console stream reads too slowly; closing it');
          stop();
          res.destroy();
          return;
        }
        res.write(`${JSON.stringify(m)}\n`);
      };
      // the response's close: the client went away, or the server ended the stream
      res.on('close', stop);
      streams.add(res);
      send({ type: 'snapshot', overview: overviewNow(), live: history.liveSummaries() });
      if (first) send({ type: 'transcript', transcript: first });
      unsubscribe = history.subscribe((m: HistoryMessage) => {
        if (m.type === 'event' && m.episode_id !== watched) return;
        send(m);
      });
      timer = setInterval(() => send({ type: 'overview', overview: overviewNow() }), tickMs);
      timer.unref?.();
    },
  );

  // an open stream would hold server.close() forever
  app.addHook('preClose', async () => {
    for (const res of [...streams]) res.end();
  });
}
