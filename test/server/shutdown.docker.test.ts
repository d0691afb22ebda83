/**
 * SIGTERM exits 0 with idle connections open, and gives the instance name back.
 * One idle TCP connection, a half-sent request, an aborted /console/stream fetch and a stream
 * reader that stopped reading used to make the process exit 1 after 5 s ("server did not close in
 * time"), on a path that left the instance's lock volume behind.
 */
import { execFileSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { expect, it } from 'vitest';
import { LOCK_LABELS } from '../../src/sandbox/engine/instance-lock.js';
import { describeDocker, labelledResources, LOCAL_NODE_IMAGE, uniqueInstance, waitFor } from '../support/docker.js';
import { FIXTURE_BUNDLE, INSTANCE_LABEL } from '../support/docker-server.js';
import { spawnServer } from '../support/serve-process.js';

const TOKEN = 'shutdown-test-token-77c1';

function lockMarkers(instance: string): string[] {
  return execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=${LOCK_LABELS.lock}=${instance}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

function rawConnect(url: string): Promise<{ socket: Socket; received: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    let data = '';
    socket.on('data', (d) => (data += d.toString()));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, received: () => data }));
    socket.once('error', reject);
  });
}

describeDocker('SIGTERM with idle and abandoned connections', () => {
  it('exits 0 and leaves no lock volume: an idle connection, a half-sent request, an aborted stream fetch, a stalled stream reader', async () => {
    const instance = uniqueInstance('idle-exit');
    const srv = await spawnServer(
      [FIXTURE_BUNDLE, '--port', '0', '--instance', instance, '--build-arg', `NODE_IMAGE=${LOCAL_NODE_IMAGE}`, '--max-concurrent-envs', '1'],
      { AGENTENV_TOKEN: TOKEN },
    );
    try {
      expect(lockMarkers(instance).length).toBeGreaterThan(0);
      const idle = await rawConnect(srv.url);
      const half = await rawConnect(srv.url);
      half.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
      // a fetch of the stream, aborted once it answered
      const ctl = new AbortController();
      const res = await fetch(`${srv.url}/console/stream`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: ctl.signal });
      expect(res.status).toBe(200);
      ctl.abort();
      // a reader that stopped reading without closing
      const stalled = await rawConnect(srv.url);
      stalled.socket.write(`GET /console/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
      await waitFor(() => stalled.received().includes('200'), 10_000, 'the stream answered');
      stalled.socket.pause();

      srv.child.kill('SIGTERM');
      const exit = await srv.exited;
      expect(exit, srv.output().slice(-2000)).toEqual({ code: 0, signal: null });
      expect(srv.output()).not.toContain('did not close in time');
      expect(lockMarkers(instance)).toEqual([]);
      expect(labelledResources(`${INSTANCE_LABEL}=${instance}`)).toEqual({ containers: [], networks: [] });
      for (const c of [idle, half, stalled]) c.socket.destroy();
    } finally {
      if (srv.child.exitCode === null) srv.child.kill('SIGKILL');
      const left = lockMarkers(instance);
      if (left.length) execFileSync('docker', ['volume', 'rm', '-f', ...left]);
    }
  });
});
