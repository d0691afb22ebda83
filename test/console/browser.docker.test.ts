/**
 * The web console in a real browser: Debian's headless Chromium driven by playwright-core,
 * against real servers on real Docker (the fixture bundle, then GridSim). Screenshots of each
 * view go to test-artifacts/. In CI (CI set) a missing Chromium fails; elsewhere it skips loudly.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
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

async function shot(page: Page, name: string, fullPage = false): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage });
}

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

describeBrowser('the web console in Chromium', () => {
  describe('fixture bundle', () => {
    let s: TestServer;
    let browser: Awaited<ReturnType<typeof launch>>;
    const call = (method: string, path: string, body?: unknown) => http(s.url, method, path, body, { authorization: `Bearer ${TOKEN}` });

    beforeAll(async () => {
      s = await startServer({ token: TOKEN, maxConcurrentEnvs: 3 });
      browser = await launch();
    });
    afterAll(async () => {
      await browser?.close();
      await s?.stop();
    });

    it('asks for the token, shows the 401 message for a wrong one, then shows the live overview', async () => {
      // a few episodes first, so the charts have something to draw: scored ones and a crash
      for (const task of ['fx-echo-0', 'fx-echo-1', 'fx-eval-0']) {
        const c = await call('POST', '/episodes', { task_id: task });
        expect(c.status).toBe(201);
        await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'echo', arguments: { text: 'warm-up' } });
        expect((await call('POST', `/episodes/${c.body.episode_id}/step`, { type: 'call_tool', tool_name: 'end_turn', arguments: {} })).body.done).toBe(true);
      }
      const crashed = await call('POST', '/episodes', { task_id: 'fx-echo-2' });
      await call('POST', `/episodes/${crashed.body.episode_id}/step`, { type: 'call_tool', tool_name: 'crash', arguments: { code: 9 } });

      const page = await browser.ctx.newPage();
      const requests: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      // a browser at / is sent to the page
      await page.goto(`${s.url}/`);
      expect(new URL(page.url()).pathname).toBe('/web/');
      await page.getByTestId('token-form').waitFor();
      await page.getByTestId('token-input').fill('not-the-token');
      await page.getByTestId('token-submit').click();
      await expect.poll(() => page.getByTestId('auth-error').textContent()).toContain('401');
      await shot(page, '01-token-refused');

      await page.getByTestId('token-input').fill(TOKEN);
      await page.getByTestId('token-submit').click();
      await page.getByTestId('gauge-envs').waitFor();
      await expect.poll(() => page.getByTestId('meter-envs').textContent()).toContain('/ 3');
      // the charts are drawn (uPlot canvases) and no longer empty
      await expect.poll(() => page.locator('[data-testid=chart-rate] canvas').count()).toBe(1);
      await expect.poll(() => page.locator('[data-testid=chart-rate] .chart-empty').count()).toBe(0);
      await expect.poll(() => page.locator('[data-testid=chart-rewards] .chart-empty').count()).toBe(0);
      await expect.poll(() => page.locator('[data-testid=chart-failures] .chart-empty').count()).toBe(0);
      await page.waitForTimeout(300); // let uPlot settle its layout for the picture
      await shot(page, '02-overview', true);
      // the token never went into a URL
      expect(requests.filter((u) => u.includes(TOKEN))).toEqual([]);
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
      await shot(page, '03-transcript');

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
      await expect.poll(() => page.locator('[data-testid=ended-episodes] tbody tr').count()).toBe(1);
      expect(await page.locator('[data-testid=ended-episodes] tbody tr').textContent()).toContain('env_crashed');
      await page.getByTestId('filter-failed').selectOption('');
      await page.getByTestId('filter-split').selectOption('eval');
      await expect.poll(() => page.locator('[data-testid=ended-episodes] tbody tr').count()).toBe(1);
      await page.getByTestId('filter-split').selectOption('');
      await shot(page, '04-episodes');

      await page.goto(`${s.url}/web/#/tasks/fx-two-turn`);
      await page.getByTestId('task-detail').waitFor();
      expect(await page.getByTestId('task-detail').textContent()).toContain('first prompt');
      // (the playground's own task picker stays mounted, hidden: only the visible one counts)
      await page.locator('[data-testid=task-search]:visible').fill('EVAL');
      await page.locator('[data-split=eval]:visible').click();
      await expect.poll(() => page.locator('[data-testid=task-list]:visible [data-task]').count()).toBe(2);
      await shot(page, '05-tasks');
      await page.close();
    });
  });

  describe('GridSim', () => {
    let s: TestServer;
    let browser: Awaited<ReturnType<typeof launch>>;

    beforeAll(async () => {
      s = await startServer({ token: TOKEN, maxConcurrentEnvs: 2 }, GRIDSIM);
      browser = await launch();
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
      await page.locator('#arg-schedule').fill(best.schedule.join(', '));
      await page.getByTestId('call-tool').click();
      await expect.poll(() => page.getByTestId('play-result').count()).toBe(1);
      expect(await page.getByTestId('play-result').first().textContent()).toMatch(/profit/i);

      await page.getByTestId('tool-select').selectOption('submit_schedule');
      await page.locator('#arg-schedule').fill(best.schedule.join(', '));
      await shot(page, '06-playground-form');
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
      expect(await page.locator('[data-kind=tool_call][data-tool=submit_schedule]').count()).toBe(1);
      await page.close();
    });
  });
});
