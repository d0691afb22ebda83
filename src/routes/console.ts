/**
 * The web console's data, as documented, authenticated JSON routes any client can use:
 *
 *   GET /console/overview            gauges (envs running / cap, resets waiting, deploys in flight)
 *                                    and the time series over a window (?window=15m|1h|6h|all)
 *   GET /console/episodes            live episodes and the last N ended ones (filterable)
 *   GET /console/episodes/:id        one episode's transcript (live or kept)
 *   GET /console/tasks               a split's task ids, searchable (GET /tasks/:task_id has the rest)
 *   GET /console/recent-tasks        per task, over the last N ended episodes kept
 *   POST /console/playground         the playground's episode start: POST /episodes with a tighter
 *                                    idle bound (CONSOLE_EPISODE_IDLE_S), then /episodes/:id/...
 *   GET /console/stream              NDJSON over a plain streaming response: a snapshot, then
 *                                    every change as it happens, and the overview every second
 *
 * The stream is read with fetch() and its Authorization header (not EventSource, which cannot
 * send one): no token ever goes in a URL.
 */
import type { FastifyInstance } from 'fastify';
import type { ServerResponse } from 'node:http';
import { CONSOLE_EPISODE_IDLE_S } from '../defaults.js';
import { NotFoundError } from '../errors.js';
import type { HistoryMessage } from '../console/history.js';
import { recentTasks } from '../console/recent-tasks.js';
import { TaskSearch } from '../console/task-search.js';
import type { ZodTypeProvider } from '../plugins/zod-schemas.js';
import {
  ConsoleEpisodesPageSchema,
  ConsoleTasksPageSchema,
  ConsoleTasksQuerySchema,
  EndedFilterSchema,
  OverviewSchema,
  RecentTasksPageSchema,
  RecentTasksQuerySchema,
  StreamQuerySchema,
  TranscriptQuerySchema,
  TranscriptSchema,
  WindowQuerySchema,
  type SeriesWindow,
  type StreamMessage,
} from '../protocol/console.js';
import { EPISODE_START_RESPONSES, EpisodeIdParamsSchema } from '../protocol/episodes.js';
import { ResetDataSchema } from '../protocol/frames.js';
import { ErrorBodySchema } from '../protocol/http.js';
import type { OpenEnvRuntime } from '../runtime.js';
import { dropReply, withClientGone } from './client-gone.js';

export interface ConsoleRouteOptions {
  runtime: OpenEnvRuntime;
  /** how often the stream sends the overview (ms) */
  tickMs?: number;
}

/** a stream whose client reads slower than this many buffered bytes is cut (it may reconnect) */
const MAX_STREAM_BUFFER = 4 * 1024 * 1024;

export async function consoleRoutes(root: FastifyInstance, opts: ConsoleRouteOptions): Promise<void> {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { bundle, history, admission, recorder, manager } = opts.runtime;
  const { requests } = opts.runtime.sessions;
  // searched in chunks, the event loop served between them (console/task-search.ts)
  const search = new TaskSearch(bundle.splits);
  const tickMs = opts.tickMs ?? 1000;
  const streams = new Set<ServerResponse>();

  const imageStatus = () => {
    const images = opts.runtime.catalog.status();
    return images ? { images } : {};
  };
  const gauges = () => ({
    at: new Date().toISOString(),
    capacity: admission.capacity,
    running: admission.activeCount,
    waiting: admission.waitingCount,
    waiting_by_lane: admission.waitingByLane(),
    deploying: history.liveCount('deploying'),
    live: history.liveCount(),
    draining: manager.isDraining,
    history: { kept: history.endedCount, size: history.size, bytes: history.endedBytesApprox },
    recorder: recorder ? recorder.stats() : null,
    ...imageStatus(),
  });
  const overviewNow = (window: SeriesWindow) => ({ ...gauges(), series: history.series(window) });

  app.get(
    '/console/overview',
    {
      schema: {
        summary: 'Console: gauges and the time series over a window',
        description:
          "Envs running and the cap, resets waiting (in all and per lane), deploys in flight; per bucket (a minute, more for long windows): deploy latency, queue wait (in all and per lane), episodes ended, failures by reason, and per split the reward's exact mean and p10–p90 band, failures, steps and turns; over the window: the reward histogram per split, p10/p50/p90 of reward, deploy and queue wait, and counts and rewards per task group. The window starts no earlier than the first data kept.",
        querystring: WindowQuerySchema,
        response: { 200: OverviewSchema.describe('the overview'), 400: ErrorBodySchema },
      },
    },
    async (req) => overviewNow(req.query.window),
  );

  app.get(
    '/console/recent-tasks',
    {
      schema: {
        summary: 'Console: per task, over the last N ended episodes kept',
        description:
          "Each task's episodes and failures, its mean reward and each score's mean over the scored ones, and its last reward; tasks with most episodes first.",
        querystring: RecentTasksQuerySchema,
        response: { 200: RecentTasksPageSchema, 400: ErrorBodySchema },
      },
    },
    async (req) => {
      const last = history.endedSummaries({ split: req.query.split, limit: req.query.n }).episodes;
      return { episodes: last.length, tasks: recentTasks(last) };
    },
  );

  app.post(
    '/console/playground',
    {
      schema: {
        summary: "Console: start the playground's episode (POST /episodes with a tighter idle bound)",
        description: `The same episode as POST /episodes (steps, state and DELETE go to /episodes/{id}), but torn down after ${CONSOLE_EPISODE_IDLE_S} s without a request (or --idle-timeout if that is shorter): a closed tab cannot say it left. The page also ends it when it goes away.`,
        body: ResetDataSchema.optional(),
        response: EPISODE_START_RESPONSES,
      },
    },
    async (req, reply) => {
      const started = await withClientGone(reply, (gone) => requests.start(req.body ?? {}, 'http', gone, CONSOLE_EPISODE_IDLE_S * 1000));
      if (!started) return dropReply(reply);
      return reply.code(201).send({ episode_id: started.ep.id, ...started.out });
    },
  );

  app.get(
    '/console/episodes',
    {
      schema: {
        summary: 'Console: live episodes and the last --history ended ones',
        querystring: EndedFilterSchema,
        response: { 200: ConsoleEpisodesPageSchema, 400: ErrorBodySchema },
      },
    },
    async (req) => {
      const q = req.query;
      const live = history
        .liveSummaries()
        .filter((s) => (q.split === undefined || s.split === q.split) && (q.task === undefined || s.task_id.includes(q.task)));
      const ended = history.endedSummaries(q);
      return { live, ended: ended.episodes, ended_total: ended.total, history_size: history.size };
    },
  );

  app.get(
    '/console/tasks',
    {
      schema: {
        summary: "Console: a split's tasks in a line each, searchable by task id",
        querystring: ConsoleTasksQuerySchema,
        response: { 200: ConsoleTasksPageSchema, 404: ErrorBodySchema },
      },
    },
    async (req) => {
      const split = req.query.split ?? bundle.manifest.default_split;
      const tasks = bundle.splits[split];
      if (!tasks) throw new NotFoundError(`unknown split "${split}"; splits: ${Object.keys(bundle.splits).join(', ')}`);
      const { offset, limit } = req.query;
      const match = req.query.q ? await search.matches(split, req.query.q) : null;
      const page = match ? Array.from(match.subarray(offset, offset + limit), (i) => tasks[i]!) : tasks.slice(offset, offset + limit);
      return {
        split,
        splits: bundle.splitCounts,
        total: match ? match.length : tasks.length,
        offset: req.query.offset,
        tasks: page.map((t) => ({ task_id: t.task_id, index: t.index, toolset: t.toolset, turns: t.turns.length, max_turns: t.max_turns })),
      };
    },
  );

  app.get(
    '/console/episodes/:id',
    {
      schema: {
        summary: "Console: an episode's transcript (live or kept)",
        description:
          'The reset prompt, every tool call with its arguments and result, turn ends (end_turn calls), and the end: scores, reward, timings or the failure with its log tail.',
        params: EpisodeIdParamsSchema,
        querystring: TranscriptQuerySchema,
        response: { 200: TranscriptSchema, 404: ErrorBodySchema },
      },
    },
    async (req, reply) => {
      const t = history.transcript(req.params.id);
      if (!t) throw new NotFoundError(`no episode "${req.params.id}" in the console's history (live, or among the last ${history.size} ended)`);
      if (req.query.download) reply.header('content-disposition', `attachment; filename="episode-${t.episode_id}.json"`);
      return t;
    },
  );

  app.get(
    '/console/stream',
    {
      schema: {
        summary: 'Console: live updates as NDJSON (one JSON object per line)',
        description:
          'A long response, read with fetch and the Authorization header. First {"type":"snapshot","overview":…,"live":[…]} (and, with ?episode=<id>, {"type":"transcript","transcript":…}); then {"type":"episode","episode":<summary>} on every change of any episode, {"type":"event","episode_id":…,"event":…} for each new transcript event of the watched episode, and {"type":"overview","overview":…} every second.',
        querystring: StreamQuerySchema,
        response: {
          200: { description: 'newline-delimited JSON', content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
          404: ErrorBodySchema,
        },
      },
    },
    async (req, reply) => {
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
      const send = (m: StreamMessage) => {
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
      const window = req.query.window;
      send({ type: 'snapshot', overview: overviewNow(window), live: history.liveSummaries() });
      if (first) send({ type: 'transcript', transcript: first });
      unsubscribe = history.subscribe((m: HistoryMessage) => {
        if (m.type === 'event' && m.episode_id !== watched) return;
        send(m);
      });
      timer = setInterval(() => send({ type: 'overview', overview: overviewNow(window) }), tickMs);
      timer.unref?.();
    },
  );

  // an open stream would hold server.close() forever
  app.addHook('preClose', async () => {
    for (const res of [...streams]) res.end();
  });
}
