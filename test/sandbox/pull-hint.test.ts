// The hint a build gets when the engine could not pull its base image: the build argument that
// chooses the base, and the local base image made for that argument (not another language's).
import { describe, expect, it } from 'vitest';
import { LOCAL_BASE_IMAGES } from '../../src/defaults.js';
import { pullHint } from '../../src/sandbox/engine/image-build.js';

const PULL = 'failed to resolve source metadata for docker.io/library/python:3.12-slim: dial tcp: no such host';

describe('pullHint names the local base of the build argument the Dockerfile uses', () => {
  it('a Python env: PYTHON_IMAGE and openenv-local/python:3, never the node base', () => {
    const hint = pullHint(PULL, 'ARG PYTHON_IMAGE=python:3.12-slim\nFROM ${PYTHON_IMAGE}\n', {});
    expect(hint).toContain('--build-arg PYTHON_IMAGE=<image>');
    expect(hint).toContain('PYTHON_IMAGE=openenv-local/python:3 offline (docker/make-local-python-base.sh makes it)');
    expect(hint).not.toContain('node');
  });

  it('a Node env: NODE_IMAGE and openenv-local/node:20', () => {
    const hint = pullHint(PULL, 'ARG NODE_IMAGE=node:20-slim\nFROM ${NODE_IMAGE}\n', { NODE_IMAGE: 'mirror/node:20' });
    expect(hint).toContain('NODE_IMAGE=openenv-local/node:20 offline (docker/make-local-node-base.sh makes it)');
    expect(hint).toContain('; given: NODE_IMAGE=mirror/node:20)');
  });

  it('each known argument of a multi-stage Dockerfile, and no example for an argument nobody makes a base for', () => {
    const hint = pullHint(PULL, 'FROM ${NODE_IMAGE} AS build\nFROM $DEBIAN_IMAGE\nFROM ${OWN}\n', {});
    expect(hint).toContain('NODE_IMAGE=<image>, DEBIAN_IMAGE=<image>, OWN=<image>');
    expect(hint).toContain(', e.g. NODE_IMAGE=openenv-local/node:20 offline');
    expect(hint).toContain('; DEBIAN_IMAGE=openenv-local/debian:bookworm offline (docker/make-local-debian-base.sh makes it)');
    expect(pullHint(PULL, 'FROM ${OWN}\n', {})).not.toContain('e.g.');
  });

  it('every local base named is made by a script of docker/ that defaults to that tag', async () => {
    const { readFile } = await import('node:fs/promises');
    for (const { image, script } of Object.values(LOCAL_BASE_IMAGES)) {
      expect(await readFile(new URL(`../../${script}`, import.meta.url), 'utf8')).toContain(`TAG="\${1:-${image}}"`);
    }
  });
});
