# The bundle server's image.
#
#   docker build -t openenv-bundle-server .                      # public node:20-slim, npm ci inside
#   docker build --build-arg NODE_IMAGE=my/node:20 -t ... .      # any Node 20 base with npm and a shell
#
# Offline machines (no registry reachable; the base may be docker/make-local-node-base.sh's image,
# which has node but neither npm nor a shell) build the `runtime-prebuilt` target, which runs no
# command at all: it copies what docker/prepare-prebuilt.sh compiled and installed on the host.
#
#   bash docker/prepare-prebuilt.sh
#   docker build --target runtime-prebuilt --build-arg NODE_IMAGE=openenv-local/node:20 -t ... .
#
# Stage order matters: Debian's Docker has only the legacy builder, which builds every stage up to
# the target, so the offline target comes before the first RUN, and the default (last) stage is
# the ordinary two-stage build.

ARG NODE_IMAGE=node:20-slim

# ---- what both runtimes share ------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime-base
ENV NODE_ENV=production
WORKDIR /app
EXPOSE 8200
# No curl in a slim or scratch base: Node's own fetch. OPENENV_PORT moves the port for the check too.
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.OPENENV_PORT||8200)+'/health',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
# Node is PID 1 and handles SIGTERM/SIGINT itself (serve.ts drains and tears every episode down,
# then exits); it starts no child process, so there is no zombie to reap and no need for an init.
# The token is read only from the environment (AGENTENV_TOKEN, or the variable --token-env names).
# Not root: uid/gid 1000 (numeric, so a base without /etc/passwd entries works too). The server
# needs the Docker socket, so run it in the socket's group, whose id varies per host:
#   docker run --group-add "$(stat -c %g /var/run/docker.sock)" ...      (compose: DOCKER_GID)
# The socket is still root on the host to whoever can use it: narrow it with a socket proxy.
USER 1000:1000
ENTRYPOINT ["node", "dist/serve.js"]
CMD ["/bundles/gridsim-v1", "--host", "0.0.0.0"]

# ---- offline: host-built dist/ and production node_modules, no RUN ------------------------------
FROM runtime-base AS runtime-prebuilt
COPY docker/prebuilt/ /app/

# ---- default: compile with dev dependencies, keep only production ones --------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src/ src/
COPY web/ web/
# the server (tsc) and the web console's page (vite → dist/web)
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf src web tsconfig.json
# the toolbox: a static busybox the server runs inside envs for its own steps, never the image's
# binaries (src/sandbox/toolbox.ts); the server finds it at toolbox/busybox beside dist/
RUN apt-get update && apt-get install -y --no-install-recommends busybox-static \
  && mkdir -p /app/toolbox && cp /bin/busybox /app/toolbox/busybox \
  && rm -rf /var/lib/apt/lists/*

FROM runtime-base AS runtime
COPY --from=build /app/package.json /app/package-lock.json /app/
COPY --from=build /app/node_modules/ /app/node_modules/
COPY --from=build /app/dist/ /app/dist/
COPY --from=build /app/toolbox/ /app/toolbox/
# the shipped harness, which harness episodes put into envs (src/episodes/harness-task.ts)
COPY harness/openenv_harness.py /app/harness/openenv_harness.py
