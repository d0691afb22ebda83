/**
 * The OpenEnv web console: a single page served at /web/. It asks for the bearer token once
 * (kept in memory; "remember in this tab" → sessionStorage), then reads the server's /console/*
 * routes and one live NDJSON stream (fetch with the Authorization header).
 */
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get, hasToken, onUnauthorized, setToken, stream } from './api';
import { EpisodesView, TranscriptView, withEvent } from './episodes';
import { OverviewView } from './overview';
import { PlaygroundView } from './playground';
import { TasksView } from './tasks';
import type { BundleInfo, EpisodeSummary, Overview, SeriesWindow, Transcript } from './types';
import { useGet } from './use-get';
import './style.css';

type Route =
  | { view: 'overview' }
  | { view: 'episodes' }
  | { view: 'episode'; id: string }
  | { view: 'tasks'; id: string | null }
  | { view: 'playground'; id: string | null };

function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  switch (parts[0]) {
    case 'episodes':
      return parts[1] ? { view: 'episode', id: parts[1] } : { view: 'episodes' };
    case 'tasks':
      return { view: 'tasks', id: parts[1] || null };
    case 'playground':
      return { view: 'playground', id: parts[1] || null };
    default:
      return { view: 'overview' };
  }
}

function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

type Auth = { state: 'checking' } | { state: 'need-token'; message: string | null } | { state: 'ok' };

function TokenForm(props: { message: string | null; onDone: () => void }) {
  const [value, setValue] = useState('');
  const [remember, setRemember] = useState(false);
  const [checking, setChecking] = useState(false);
  const [message, setMessage] = useState(props.message);
  useEffect(() => setMessage(props.message), [props.message]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setChecking(true);
    setToken(value.trim(), remember);
    try {
      await get('console/overview');
      props.onDone();
    } catch (err) {
      setToken(null, false);
      setMessage(
        err instanceof ApiError && err.status === 401
          ? 'The server refused this token (401 Unauthorized). Check it and try again.'
          : `Cannot reach the server: ${(err as Error).message}`,
      );
    } finally {
      setChecking(false);
    }
  };
  return (
    <div class="login">
      <form onSubmit={submit} data-testid="token-form">
        <h1>OpenEnv console</h1>
        <p>This server needs its bearer token. It stays in this page's memory and is sent only in the Authorization header.</p>
        {message && (
          <p class="error" role="alert" data-testid="auth-error">
            {message}
          </p>
        )}
        <label for="token">Token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          data-testid="token-input"
        />
        <label class="check">
          <input type="checkbox" checked={remember} onChange={(e) => setRemember((e.target as HTMLInputElement).checked)} data-testid="remember" /> remember in
          this tab (sessionStorage)
        </label>
        <button type="submit" disabled={checking || !value.trim()} data-testid="token-submit">
          {checking ? 'Checking…' : 'Open the console'}
        </button>
      </form>
    </div>
  );
}

function App() {
  const route = useRoute();
  const [auth, setAuth] = useState<Auth>({ state: 'checking' });
  const [overview, setOverview] = useState<Overview | null>(null);
  const [live, setLive] = useState<Map<string, EpisodeSummary>>(new Map());
  const [connected, setConnected] = useState(false);
  const [endedTick, setEndedTick] = useState(0);
  const [transcript, setTranscript] = useState<Transcript | null>(null);
  const [seriesWindow, setSeriesWindow] = useState<SeriesWindow>('all');
  const watched = route.view === 'episode' ? route.id : null;
  // a 401 on a later request (a token revoked) asks again; the first probe and the form say their own
  const authState = useRef(auth.state);
  authState.current = auth.state;

  // first: does the server want a token (none remembered, none in the path)?
  useEffect(() => {
    get('console/overview').then(
      () => setAuth({ state: 'ok' }),
      (e) =>
        setAuth(
          e instanceof ApiError && e.status === 401
            ? { state: 'need-token', message: hasToken() ? 'The remembered token was refused (401 Unauthorized).' : null }
            : { state: 'need-token', message: `Cannot reach the server: ${(e as Error).message}` },
        ),
    );
    return onUnauthorized((m) => {
      if (authState.current !== 'ok') return;
      setToken(null, false);
      setAuth({ state: 'need-token', message: `The server answered 401 Unauthorized: ${m}` });
    });
  }, []);

  const bundle = useGet<BundleInfo>(auth.state === 'ok' ? 'bundle' : null).data;
  const splits = bundle ? Object.keys(bundle.splits) : [];

  // one live stream; it also carries the watched episode's transcript events
  useEffect(() => {
    if (auth.state !== 'ok') return;
    const ctl = new AbortController();
    if (watched === null) setTranscript(null);
    const q = new URLSearchParams({ window: seriesWindow });
    if (watched) q.set('episode', watched);
    void stream(
      `console/stream?${q}`,
      (m) => {
        if (m.type === 'snapshot') {
          setOverview(m.overview);
          setLive(new Map(m.live.map((e) => [e.episode_id, e])));
        } else if (m.type === 'overview') {
          setOverview(m.overview);
        } else if (m.type === 'episode') {
          setLive((cur) => {
            const next = new Map(cur);
            if (m.episode.phase === 'done') next.delete(m.episode.episode_id);
            else next.set(m.episode.episode_id, m.episode);
            return next;
          });
          if (m.episode.phase === 'done') setEndedTick((n) => n + 1);
          if (m.episode.episode_id === watched) setTranscript((t) => (t ? { ...t, ...m.episode } : t));
        } else if (m.type === 'transcript') {
          setTranscript(m.transcript as Transcript);
        } else if (m.type === 'event') {
          setTranscript((t) => (t && t.episode_id === m.episode_id ? withEvent(t, m.index, m.event as Transcript['events'][number]) : t));
        }
      },
      ctl.signal,
      setConnected,
    );
    return () => ctl.abort();
  }, [auth.state, watched, seriesWindow]);

  if (auth.state === 'checking') return <p class="muted center">Connecting…</p>;
  if (auth.state === 'need-token') return <TokenForm message={auth.message} onDone={() => setAuth({ state: 'ok' })} />;

  const liveList = [...live.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
  const tab = (view: string, label: string, href: string) => (
    <a href={href} class={route.view === view || (view === 'episodes' && route.view === 'episode') ? 'nav on' : 'nav'} data-nav={view}>
      {label}
    </a>
  );
  return (
    <>
      <header class="top">
        <strong class="brand">OpenEnv console</strong>
        <nav>
          {tab('overview', 'Overview', '#/overview')}
          {tab('episodes', `Episodes (${liveList.length} live)`, '#/episodes')}
          {tab('tasks', 'Tasks', '#/tasks')}
          {tab('playground', 'Playground', '#/playground')}
        </nav>
        <span class="spacer" />
        <span class={connected ? 'dot live' : 'dot'} title={connected ? 'live' : 'reconnecting'} />
        {hasToken() && (
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setToken(null, false);
              setAuth({ state: 'need-token', message: null });
            }}
          >
            Forget token
          </button>
        )}
      </header>
      <main>
        {route.view === 'overview' && (
          <OverviewView overview={overview} connected={connected} bundle={bundle} window={seriesWindow} setWindow={setSeriesWindow} endedTick={endedTick} />
        )}
        {route.view === 'episodes' && <EpisodesView live={liveList} splits={splits} endedTick={endedTick} />}
        {route.view === 'episode' && (
          <TranscriptView
            id={route.id}
            transcript={transcript?.episode_id === route.id ? transcript : null}
            live={live.get(route.id)}
            setTranscript={setTranscript}
          />
        )}
        {route.view === 'tasks' && <TasksView id={route.id} />}
        {/* kept mounted: an episode in play survives a look at another view */}
        <div hidden={route.view !== 'playground'}>
          <PlaygroundView taskId={route.view === 'playground' ? route.id : null} live={liveList} capacity={overview?.capacity ?? null} />
        </div>
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
