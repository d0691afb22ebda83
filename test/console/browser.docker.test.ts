/**
 * The web console in a real browser: Debian's headless Chromium driven by playwright-core,
 * against real servers on real Docker (the fixture bundle, then GridSim). Screenshots of each
 * view go to test-artifacts/; with OPENENV_UPDATE_DOC_IMAGES=1 the documented ones are also copied
 * to docs/img/ (tracked files: a plain run leaves them alone). In CI (CI set) a missing
 * Chromium fails; elsewhere it skips loudly.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toInt, type Battery } from '../../bundles/gridsim-v1/envs/gridsim/src/battery.js';
import { optimize } from '../../bundles/gridsim-v1/envs/gridsim/src/optimum.js';
import { toCents } from '../../bundles/gridsim-v1/envs/gridsim/src/physics.js';
import { describeDocker, IN_CI } from '../support/docker.js';
import { startServer, type TestServer } from '../support/docker-server.js';
import { http } from '../routes/http.js';

const CHROMIUM = process.env.OPENENV_TEST_CHROMIUM ?? '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
const TOKEN = 'browser-test-token-7Hq2';
const ARTIFACTS = join(process.cwd(), 'test-artifacts');
const GRIDSIM = join(process.cwd(), 'bundles', 'gridsim-v1');
const DOCS_IMG = join(process.cwd(), 'docs', 'img');

function describeBrowser(name: string, fn: () => void): void {
  if (HAS_CHROMIUM) return describeDocker(name, fn);
  if (IN_CI) {
    describe(name, () => {
      it('needs Chromium', () => {
        throw new Error(`CI is set but ${CHROMIUM} is missing: install Debian's chromium (.ci/apt-packages lists it)`);
      });
    });
    return;
  }
  console.warn(
    `\n\n!!! NO CHROMIUM at ${CHROMIUM}: skipping the web console's browser tests (apt-get install -y chromium). They run (and must pass) in CI. !!!\n`,
  );
  describe.skip(`${name} [SKIPPED: no Chromium]`, fn);
}

async function launch(): Promise<{ ctx: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'openenv-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 860 },
  });
  return {
    ctx,
    close: async () => {
      await ctx.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

const UPDATE_DOC_IMAGES = process.env.OPENENV_UPDATE_DOC_IMAGES === '1';

/** a screenshot to test-artifacts/<name>.png; with `docs`, under OPENENV_UPDATE_DOC_IMAGES=1, also docs/img/console-<docs>.png */
async function shot(page: Page, name: string, fullPage = false, docs?: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage });
  if (docs && UPDATE_DOC_IMAGES) copyFileSync(file, join(DOCS_IMG, `console-${docs}.png`));
}

interface BarBox {
  series: string;
  slot: number;
  value: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** every bar of a chart as drawn: its series, slot, value and box on the page */
function bars(page: Page, chart: string): Promise<BarBox[]> {
  return page.locator(`[data-testid=${chart}] rect.bar`).evaluateAll((els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return {
        series: e.getAttribute('data-series') ?? '',
        slot: Number(e.getAttribute('data-slot')),
        value: Number(e.getAttribute('data-value')),
        left: r.left,
        right: r.right,
        top: r.top,
        bottom: r.bottom,
      };
    }),
  );
}

/** no two bars share a pixel: each count has its own visible rectangle */
function expectNoOverlap(boxes: BarBox[]): void {
  for (const b of boxes) expect(b.bottom - b.top, `${b.series} at slot ${b.slot}`).toBeGreaterThan(0);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i]!;
      const b = boxes[j]!;
      const apart = a.right <= b.left + 0.5 || b.right <= a.left + 0.5 || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5;
      expect(apart, `${a.series} and ${b.series} overlap at slot ${a.slot}`).toBe(true);
    }
  }
}

const mean = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1e6) / 1e6;

/** Reads the battery and the 24 prices off a GridSim prompt (the text the model sees). */
export function situationFromPrompt(text: string): { battery: Battery; prices: number[] } {
  const num = (re: RegExp, what: string) => {
    const m = re.exec(text);
    if (!m) throw new Error(`no ${what} in the prompt`);
    return Number(m[1]);
  };
  const k_ch = num(/k_ch = (\d+) unit/, 'k_ch');
  const k_dis = num(/k_dis = (\d+) unit/, 'k_dis');
  const unit_mwh = num(/\| unit \| ([\d.]+) MWh/, 'unit');
  const soc_levels = num(/\| capacity \| (\d+) unit/, 'capacity');
  const hours = num(/MWh \((\d+) h at full discharge power\)/, 'hours');
  const eta = num(/eta = ([\d.]+)/, 'eta');
  const c_deg = num(/c_deg = \$([\d.]+)/, 'c_deg');
  const cycle = num(/\| cycle cap \| at most (\d+) unit/, 'cycle cap');
  const s0 = num(/\| charge at the start \| (\d+) unit/, 's0');
  const sEnd = num(/\| least charge at the end \| (\d+) unit/, 's_end_min');
  const prices = [...text.matchAll(/^HE(\d\d): (-?[\d.]+)$/gm)].map((m) => Number(m[2]));
  if (prices.length !== 24) throw new Error(`expected 24 prices in the prompt, found ${prices.length}`);
  const battery: Battery = {
    id: 'from-prompt',
    hours,
    k_ch,
    k_dis,
    unit_mwh,
    p_ch_mw: k_ch * unit_mwh,
    p_dis_mw: k_dis * unit_mwh,
    soc_levels,
    energy_mwh: soc_levels * unit_mwh,
    eta,
    c_deg,
    cycle_cap_units: cycle,
    s0,
    s_end_min: sEnd,
  };
  return { battery, prices };
}

/** a new page at the console (a hash route), past the token form */
async function openConsole(url: string, hash = '', ctx = browserCtx): Promise<Page> {
  const page = await ctx!.newPage();
  await page.goto(`${url}/web/${hash}`);
  await page.getByTestId('token-input').fill(TOKEN);
  await page.getByTestId('token-submit').click();
  await page.locator('header.top').waitFor();
  return page;
}
let browserCtx: BrowserContext | null = null;

describeBrowser('the web console in Chromium', () => {
  describe('fixture bundle', () => {
    let s: TestServer;
    let browser: Awaited<ReturnType<typeof launch>>;
    const call = (method: string, path: string, body?: unknown) => http(s.url, method, path, body, { authorization: `Bearer ${TOKEN}` });

    beforeAll(async () => {
      s = await startServer({ token: TOKEN, maxConcurrentEnvs: 3 });
      browser = await launch();
      browserCtx = browser.ctx;
    });
    afterAll(async () => {
      await browser?.close();
      await s?.stop();
    });

    const rewards: Record<string, number[]> = {};
    let crashedId = '';
    /** failed episodes the first test played: a crash and an invalid_scores per attempt */
    let failedPlayed = 0;

    it('asks for the token (no 401 before one is typed), shows the 401 message for a wrong one, then shows the live overview', async () => {
      // a few episodes first, so the charts have something to draw: scored ones (a train and an
      // eval one in the same reward bin, 0.9–1), and two failures of different reasons
      for (const task of ['fx-echo-0', 'fx-echo-0', 'fx-echo-1', 'fx-eval-0']) {
        const c = await call('POST', '/episodes', { task_id: task });
        expect(c.status).toBe(201);
        await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'warm-up' } });
        const end = await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
        expect(end.body.done).toBe(true);
        (rewards[c.body.observation.split as string] ??= []).push(end.body.reward as number);
      }
      // an env_crashed and an invalid_scores failure in the same minute (a pair that straddles a
      // minute's end is played again)
      for (let attempt = 0; ; attempt++) {
        const crashed = await call('POST', '/episodes', { task_id: 'fx-echo-2' });
        crashedId = crashed.body.episode_id;
        await call('POST', `/episodes/${crashedId}/step`, { type: 'call_tool', tool_name: 'crash', arguments: { code: 9 } });
        const bad = await call('POST', '/episodes', { task_id: 'fx-bad-scores' });
        const badEnd = await call('POST', `/episodes/${bad.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
        expect(badEnd.body.observation.failure.reason).toBe('invalid_scores');
        failedPlayed += 2;
        const f = (await call('GET', '/console/overview?window=all')).body.series.failures as Record<string, number[]>;
        if (f.env_crashed!.some((n, i) => n > 0 && f.invalid_scores![i]! > 0)) break;
        expect(attempt).toBeLessThan(3);
      }

      const page = await browser.ctx.newPage();
      const requests: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      // a browser at / is sent to the page
      await page.goto(`${s.url}/`);
      expect(new URL(page.url()).pathname).toBe('/web/');
      await page.getByTestId('token-form').waitFor();
      // nothing typed yet: no error shown (the page's first probe was refused, as it should be)
      expect(await page.getByTestId('auth-error').count()).toBe(0);
      await shot(page, '00-token', false, 'token');
      await page.getByTestId('token-input').fill('not-the-token');
      await page.getByTestId('token-submit').click();
      await expect.poll(() => page.getByTestId('auth-error').textContent()).toContain('401');
      await shot(page, '01-token-refused');

      await page.getByTestId('token-input').fill(TOKEN);
      await page.getByTestId('token-submit').click();
      await page.getByTestId('gauge-envs').waitFor();
      await expect.poll(() => page.getByTestId('meter-envs').textContent()).toContain('/ 3');
      // the charts are drawn (SVG) and no longer empty
      await expect.poll(() => page.locator('[data-testid=chart-rate] svg').count()).toBe(1);
      await expect.poll(() => page.locator('[data-testid=chart-rate] .chart-empty').count()).toBe(0);
      await expect.poll(() => page.locator('[data-testid=chart-rewards] .chart-empty').count()).toBe(0);
      await expect.poll(() => page.locator('[data-testid=chart-failures] .chart-empty').count()).toBe(0);
      await shot(page, '02-overview', true);
      // the token never went into a URL
      expect(requests.filter((u) => u.includes(TOKEN))).toEqual([]);
      await page.close();
    });

    it('no count is hidden: two failure reasons in one minute stack, two splits in one reward bin stand side by side', async () => {
      const page = await openConsole(s.url);
      await expect.poll(async () => (await bars(page, 'chart-failures')).length).toBeGreaterThanOrEqual(2);
      const failures = await bars(page, 'chart-failures');
      const slot = failures.find((b) => b.series === 'env_crashed' && failures.some((o) => o.series === 'invalid_scores' && o.slot === b.slot))!.slot;
      const same = failures.filter((b) => b.slot === slot);
      expect(same.map((b) => b.series).sort()).toEqual(['env_crashed', 'invalid_scores']);
      expectNoOverlap(failures);
      // the same drawing holds what the server counted, each count once
      const served = (await call('GET', '/console/overview?window=all')).body.series.failures as Record<string, number[]>;
      const total = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      expect(total(failures.map((b) => b.value))).toBe(total(Object.values(served).flat()));

      const bins = await bars(page, 'chart-rewards');
      // fx-echo-1 (train, 1) and fx-eval-0 (eval, 0.9) share the 0.9–1 bin
      const top = bins.filter((b) => b.slot === 10);
      expect(top.map((b) => b.series.split(' ')[0]).sort()).toEqual(['eval', 'train']);
      expectNoOverlap(bins);
      await page.close();
    });

    it('shows exact means (and counts) computed from the rewards, next to p10/p50/p90, and keeps them over a reload', async () => {
      const page = await openConsole(s.url);
      for (const [split, rs] of Object.entries(rewards)) {
        const row = page.locator(`[data-testid=summary] [data-row=reward-${split}]`);
        await expect.poll(() => row.locator('[data-stat=mean]').textContent()).toBe(String(mean(rs)));
        expect(await row.locator('[data-stat=n]').textContent()).toBe(String(rs.length));
        expect(await page.getByTestId('chart-rewards').textContent()).toContain(`${split} (n=${rs.length}, mean ${mean(rs)})`);
      }
      // served by the server from what it keeps: a reload shows the same numbers
      await page.reload();
      await page.getByTestId('token-input').fill(TOKEN);
      await page.getByTestId('token-submit').click();
      const train = page.locator('[data-testid=summary] [data-row=reward-train] [data-stat=mean]');
      await expect.poll(() => train.textContent()).toBe(String(mean(rewards.train!)));
      await page.close();
    });

    it('shows queue waits per lane: a summary row per lane that waited (counted as the server counted them), a queue line per lane, resets waiting per lane', async () => {
      const page = await openConsole(s.url);
      const byLane = (await call('GET', '/console/overview?window=1h')).body.series.summary.queue_wait_s_by_lane as Record<string, { n: number }>;
      // the eval episode waited in the high lane (--split-priority's default), every train one in the normal lane
      expect(Object.keys(byLane)).toEqual(['high', 'normal']);
      expect(byLane.high!.n).toBe(rewards.eval!.length);
      expect(byLane.normal!.n).toBe(rewards.train!.length + failedPlayed);
      for (const [lane, d] of Object.entries(byLane)) {
        const row = page.locator(`[data-testid=summary] [data-row=queue-${lane}]`);
        await expect.poll(() => row.locator('[data-stat=n]').textContent()).toBe(String(d.n));
      }
      expect(await page.locator('[data-testid=summary] [data-row=queue-low]').count()).toBe(0);
      const legend = await page.locator('[data-testid=chart-queue] .legend-item').allTextContents();
      expect(legend.map((l) => l.trim())).toEqual(['high mean', 'high max', 'normal mean', 'normal max']);
      expect(await page.getByTestId('waiting-by-lane').textContent()).toBe('high 0 · normal 0 · low 0');
      await page.close();
    });

    it("the task table shows each declared score's mean beside the mean reward, read off real episodes", async () => {
      // fx-echo-3 reports two scores, quality and steps (its tool calls); fx-echo-0 quality alone
      const played: { reward: number; scores: Record<string, number> }[] = [];
      for (const echoes of [1, 3]) {
        const c = await call('POST', '/episodes', { task_id: 'fx-echo-3' });
        for (let i = 0; i < echoes; i++)
          await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: `w${i}` } });
        const end = await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
        expect(end.body.done).toBe(true);
        played.push({ reward: end.body.reward, scores: end.body.observation.scores });
      }
      expect(played.map((p) => Object.keys(p.scores).sort())).toEqual([
        ['quality', 'steps'],
        ['quality', 'steps'],
      ]);
      const page = await openConsole(s.url);
      const table = page.getByTestId('recent-tasks');
      const row = table.locator('tr[data-task=fx-echo-3]');
      await row.waitFor();
      expect(await table.locator('th[data-score]').allTextContents()).toEqual(['mean quality', 'mean steps']);
      expect(await row.locator('[data-stat=mean]').textContent()).toBe(String(mean(played.map((p) => p.reward))));
      expect(await row.locator('td[data-score=quality]').textContent()).toBe(String(mean(played.map((p) => p.scores.quality!))));
      expect(await row.locator('td[data-score=steps]').textContent()).toBe(String(mean(played.map((p) => p.scores.steps!))));
      // a task that reports no steps score shows none; its quality is its reward (the mean of one score)
      const echo0 = table.locator('tr[data-task=fx-echo-0]');
      expect(await echo0.locator('td[data-score=steps]').textContent()).toBe('—');
      expect(await echo0.locator('td[data-score=quality]').textContent()).toBe(await echo0.locator('[data-stat=mean]').textContent());
      await table.screenshot({ path: join(ARTIFACTS, '10-recent-tasks.png') });
      await page.close();
    });

    it('describes a death during a call as during that call, from the failure and the call it cut short', async () => {
      const page = await openConsole(s.url, `#/episodes/${crashedId}`);
      await page.getByTestId('failure-headline').waitFor();
      expect(await page.getByTestId('failure-headline').textContent()).toBe('env crashed during the call to crash (step 1)');
      await shot(page, '08-failure', false, 'failure');
      await page.close();
    });

    it('closing the page with a playground episode open gives its slot back within seconds', async () => {
      const page = await openConsole(s.url, '#/playground/fx-echo-0');
      await expect.poll(() => page.getByTestId('chosen-task').textContent()).toBe('fx-echo-0');
      await page.getByTestId('start').click();
      await page.getByTestId('playground').waitFor({ timeout: 60_000 });
      const id = (await page.getByTestId('playground').getAttribute('data-episode'))!;
      expect(s.app.openenv.manager.get(id)?.phase).toBe('running');
      expect(s.app.openenv.admission.activeCount).toBe(1);
      await page.close();
      // the page's keepalive DELETE ends it: gone long before any idle bound (120 s, 1800 s)
      await expect.poll(() => s.app.openenv.manager.get(id), { timeout: 10_000 }).toBeUndefined();
      await expect.poll(() => s.app.openenv.admission.activeCount, { timeout: 10_000 }).toBe(0);
    });

    it('a page that goes away the moment its playground episode shows still ends it (no moment between the start and the DELETE it would send)', async () => {
      const page = await openConsole(s.url, '#/playground/fx-echo-0');
      await expect.poll(() => page.getByTestId('chosen-task').textContent()).toBe('fx-echo-0');
      // the page goes away in the same task that shows the episode, before any effect of the render has run
      // (the page's script as text: this file is compiled without the DOM's types)
      await page.evaluate(`new MutationObserver((_, seen) => {
        if (!document.querySelector('[data-testid=playground]')) return;
        seen.disconnect();
        dispatchEvent(new Event('pagehide'));
      }).observe(document.body, { childList: true, subtree: true })`);
      await page.getByTestId('start').click();
      await page.getByTestId('playground').waitFor({ timeout: 60_000 });
      const id = (await page.getByTestId('playground').getAttribute('data-episode'))!;
      await expect.poll(() => s.app.openenv.manager.get(id), { timeout: 10_000 }).toBeUndefined();
      await expect.poll(() => s.app.openenv.admission.activeCount, { timeout: 10_000 }).toBe(0);
      await page.close();
    });

    it('works under --token-in-path: the page at /t/<token>/web/ reads its data through the prefix', async () => {
      const prefixed = await startServer({ token: TOKEN, tokenInPath: true, maxConcurrentEnvs: 2 });
      try {
        const page = await browser.ctx.newPage();
        const statuses: number[] = [];
        page.on('response', (r) => {
          if (r.url().includes('/console/')) statuses.push(r.status());
        });
        await page.goto(`${prefixed.url}/t/${TOKEN}/web/`);
        // every data request went through the prefix: no token to ask for
        await page.getByTestId('gauge-envs').waitFor();
        await expect.poll(() => page.getByTestId('meter-envs').textContent()).toContain('/ 2');
        expect(await page.getByTestId('token-form').count()).toBe(0);
        expect(statuses.length).toBeGreaterThan(0);
        expect(statuses.every((st) => st === 200)).toBe(true);
        await page.close();
      } finally {
        await prefixed.stop();
      }
    });

    it('shows an episode a client plays, live, with its tool calls in the transcript', async () => {
      const page = await browser.ctx.newPage();
      await page.goto(`${s.url}/web/#/episodes`);
      // the token was not remembered (the box was left unticked): asked again in a new page
      await page.getByTestId('token-input').fill(TOKEN);
      await page.getByTestId('token-submit').click();
      await page.getByTestId('live-episodes').waitFor();

      const created = await call('POST', '/episodes', { task_id: 'fx-two-turn' });
      const id = created.body.episode_id as string;
      const row = page.locator(`[data-testid=live-episodes] tr[data-episode="${id}"]`);
      await row.waitFor();
      expect(await row.textContent()).toContain('fx-two-turn');
      await row.click();
      await page.getByTestId('transcript').waitFor();
      await expect.poll(() => page.locator('[data-kind=reset]').textContent()).toContain('first prompt');

      await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'seen-in-the-browser' } });
      const echo = page.locator('[data-kind=tool_call][data-tool=echo]');
      await echo.waitFor();
      expect(await echo.textContent()).toContain('seen-in-the-browser');
      await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'fail', arguments: { message: 'a tool error' } });
      await page.locator('[data-kind=tool_call][data-tool=fail]').waitFor();
      await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
      await expect.poll(() => page.locator('[data-kind=tool_call][data-tool=end_turn]').first().textContent()).toContain('second prompt');
      await call('POST', `/episodes/${id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: { answer: 'x' } });
      await page.locator('[data-kind=end]').waitFor();
      await expect.poll(() => page.getByTestId('end-reward').textContent()).toContain('0.5');
      // the order the model lived it
      const kinds = await page
        .locator('.events > article')
        .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-kind')}:${e.getAttribute('data-tool') ?? ''}`));
      expect(kinds).toEqual(['reset:', 'tool_call:echo', 'tool_call:fail', 'tool_call:end_turn', 'tool_call:end_turn', 'end:']);
      await shot(page, '03-transcript', false, 'transcript');

      // the transcript downloads as JSON
      const [dl] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download').click()]);
      expect(dl.suggestedFilename()).toBe(`episode-${id}.json`);
      const file = join(ARTIFACTS, dl.suggestedFilename());
      await dl.saveAs(file);
      const saved = JSON.parse((await import('node:fs')).readFileSync(file, 'utf8'));
      expect(saved).toMatchObject({ episode_id: id, end_reason: 'turns_ended', reward: 0.5 });
      expect(JSON.stringify(saved)).not.toContain(TOKEN);

      // the ended list shows it; filters narrow it
      await page.goto(`${s.url}/web/#/episodes`);
      await page.locator(`[data-testid=ended-episodes] tr[data-episode="${id}"]`).waitFor();
      await page.getByTestId('filter-failed').selectOption('true');
      // the crashes and invalid scores of the first test (a pair played again when it straddled a minute's end)
      await expect.poll(() => page.locator('[data-testid=ended-episodes] tbody tr').count()).toBe(failedPlayed);
      expect(await page.locator('[data-testid=ended-episodes] tbody').textContent()).toContain('env_crashed');
      expect(await page.locator('[data-testid=ended-episodes] tbody').textContent()).toContain('invalid_scores');
      await page.getByTestId('filter-failed').selectOption('');
      await page.getByTestId('filter-split').selectOption('eval');
      await expect.poll(() => page.locator('[data-testid=ended-episodes] tbody tr').count()).toBe(1);
      await page.getByTestId('filter-split').selectOption('');
      await shot(page, '04-episodes', false, 'episodes');

      await page.goto(`${s.url}/web/#/tasks/fx-two-turn`);
      await page.getByTestId('task-detail').waitFor();
      expect(await page.getByTestId('task-detail').textContent()).toContain('first prompt');
      // (the playground's own task picker stays mounted, hidden: only the visible one counts)
      await page.locator('[data-testid=task-search]:visible').fill('EVAL');
      await page.locator('[data-split=eval]:visible').click();
      await expect.poll(() => page.locator('[data-testid=task-list]:visible [data-task]').count()).toBe(2);
      await shot(page, '05-tasks', false, 'tasks');
      await page.close();
    });
  });

  describe('GridSim', () => {
    let s: TestServer;
    let browser: Awaited<ReturnType<typeof launch>>;
    const call = (method: string, path: string, body?: unknown) => http(s.url, method, path, body, { authorization: `Bearer ${TOKEN}` });
    /** the wiring task the playground played to reward 1.0 */
    let wiringTask = '';

    beforeAll(async () => {
      s = await startServer({ token: TOKEN, maxConcurrentEnvs: 2 }, GRIDSIM);
      browser = await launch();
      browserCtx = browser.ctx;
    });
    afterAll(async () => {
      await browser?.close();
      await s?.stop();
    });

    it('the playground plays a wiring task to reward 1.0 by hand, through the tool form', async () => {
      const page = await browser.ctx.newPage();
      await page.goto(`${s.url}/web/#/playground`);
      await page.getByTestId('token-input').fill(TOKEN);
      await page.getByTestId('remember').check();
      await page.getByTestId('token-submit').click();
      await page.locator('[data-split=wiring]').click();
      // the list shown is the wiring split's once its tab is the one on (before that, the default split's)
      await page.locator('[data-split=wiring].on').waitFor();
      const first = page.locator('[data-testid=task-list] [data-task]').first();
      await first.waitFor();
      const taskId = (await first.getAttribute('data-task'))!;
      expect(taskId).toMatch(/^dam-v1-/);
      wiringTask = taskId;
      await first.click();
      await expect.poll(() => page.getByTestId('chosen-task').textContent()).toBe(taskId);
      await page.getByTestId('start').click();
      await page.getByTestId('playground').waitFor({ timeout: 120_000 });
      // counted like any episode: it is live on the server
      const episodeId = (await page.getByTestId('playground').getAttribute('data-episode'))!;
      expect(s.app.openenv.manager.get(episodeId)?.phase).toBe('running');

      // solve it from what the model sees: the prompt's battery table and prices
      const prompt = (await page.getByTestId('prompt-user').textContent())!;
      const { battery, prices } = situationFromPrompt(prompt);
      const best = optimize(toInt(battery), prices.map(toCents));

      // a check through the form first, then the submission
      await page.getByTestId('tool-select').selectOption('check_schedule');
      await page.locator('[data-testid=tool-form][data-tool=check_schedule]').waitFor();
      await page.locator('#arg-schedule').fill(best.schedule.join(', '));
      await page.getByTestId('call-tool').click();
      await expect.poll(() => page.getByTestId('play-result').count()).toBe(1);
      expect(await page.getByTestId('play-result').first().textContent()).toMatch(/profit/i);

      await page.getByTestId('tool-select').selectOption('submit_schedule');
      await page.locator('[data-testid=tool-form][data-tool=submit_schedule]').waitFor();
      await page.locator('#arg-schedule').fill(best.schedule.join(', '));
      await shot(page, '06-playground-form', false, 'playground');
      await page.getByTestId('call-tool').click();
      await page.getByTestId('play-done').waitFor();
      expect(await page.getByTestId('play-reward').textContent()).toBe('1');
      expect(await page.getByTestId('play-done').textContent()).toContain('schedule 1');
      await shot(page, '07-playground-done');

      await page.getByTestId('close').click();
      await page.getByTestId('new').waitFor();
      await expect.poll(() => s.app.openenv.manager.get(episodeId)).toBeUndefined();

      // "remember in this tab": a reload needs no token
      await page.goto(`${s.url}/web/#/episodes/${episodeId}`);
      await page.getByTestId('transcript').waitFor();
      const submitted = page.locator('[data-kind=tool_call][data-tool=submit_schedule]');
      expect(await submitted.count()).toBe(1);
      // a 24-hour schedule prints on one line, not one number per line
      expect(await submitted.locator('.call-args pre').textContent()).toBe(JSON.stringify({ schedule: best.schedule }));
      // the long prompt folds behind its first line; opening it shows all of it
      const fold = page.locator('[data-kind=reset] details[data-fold]').last();
      expect(await fold.evaluate((d) => d.hasAttribute('open'))).toBe(false);
      await fold.locator('summary').click();
      expect(await fold.locator('pre').textContent()).toBe(prompt);
      await shot(page, '09-transcript-gridsim', true, 'transcript-gridsim');
      await page.close();
    });

    it("the group table shows the schedule score's mean beside the mean reward, after the playground's episode and an idle one", async () => {
      expect(wiringTask).not.toBe('');
      // the same task again, idling all day: its schedule is scored too
      const c = await call('POST', '/episodes', { task_id: wiringTask });
      expect(c.status).toBe(201);
      let end = await call('POST', `/episodes/${c.body.episode_id}/step`, {
        type: 'call_tool',
        tool_name: 'submit_schedule',
        arguments: { schedule: new Array(24).fill(0) },
      });
      if (!end.body.done) end = await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} });
      expect(end.body.done).toBe(true);
      const idle = { reward: end.body.reward as number, schedule: end.body.observation.scores.schedule as number };
      expect(idle.reward).toBeLessThan(1);
      const hours = String((await call('GET', `/tasks/${encodeURIComponent(wiringTask)}`)).body.groups.battery_h);

      const page = await openConsole(s.url);
      const groups = page.getByTestId('groups');
      await groups.waitFor();
      await page.getByTestId('groups-split').selectOption('wiring');
      await page.getByTestId('groups-name').selectOption('battery_h');
      const row = groups.locator(`tr[data-group-value="${hours}"]`);
      await expect.poll(() => row.locator('td').nth(1).textContent()).toBe('2');
      expect(await groups.locator('th[data-score]').allTextContents()).toEqual(['mean schedule']);
      // the playground's episode scored 1 (its reward is the one score): the means are of 1 and the idle day's
      expect(await row.locator('[data-stat=mean]').textContent()).toBe(String(mean([1, idle.reward])));
      expect(await row.locator('td[data-score=schedule]').textContent()).toBe(String(mean([1, idle.schedule])));
      await groups.screenshot({ path: join(ARTIFACTS, '11-groups.png') });
      await page.close();
    });

    it('the overview says what each env runs with: the lock-down (docs/security.md)', async () => {
      const page = await openConsole(s.url);
      const row = page.getByTestId('envs-granted').getByTestId('env-gridsim');
      await row.waitFor();
      expect(await row.locator('td').allTextContents()).toEqual([
        'gridsim',
        'runc',
        'defaults',
        'writable',
        "image's",
        expect.stringMatching(/ MB, /),
        '2048 MB',
        '—',
      ]);
      await page.close();
    });
  });
});
