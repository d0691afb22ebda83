#!/usr/bin/env bash
# The bundle server on a swarm manager, envs spread over the swarm (--sandbox swarm):
#
#   openssl rand -hex 24 > /etc/openenv/token && chmod 600 /etc/openenv/token
#   OPENENV_IMAGE=registry.internal:5000/openenv-bundle-server:0.1 OPENENV_REGISTRY=registry.internal:5000 \
#     OPENENV_BUNDLES_DIR=/srv/openenv/bundles OPENENV_TOKEN_FILE=/etc/openenv/token \
#     bash deploy/swarm-manager.sh up        # also: down, status
#
# Why a plain container and not a stack or a service: the server joins each episode's attachable
# overlay from its own container, and Docker never connects a swarm-managed container (a service's
# task) to an overlay the manager has not placed it on: the connect fails with "network … not
# found" (moby's findAndAttachNetwork), so every reset would fail. A plain container on a manager
# joins overlays as any attachable-overlay client does. The server refuses to start as a service
# task, saying so. What a stack would give is kept here by other means:
# - restarts: --restart unless-stopped (the engine restarts it after a crash or a reboot);
# - the token: a file on the manager (mode 600), mounted read-only at /run/secrets/agentenv_token
#   and read with --token-file (swarm secrets exist only for services): never an environment
#   variable, never a flag;
# - the port: published on the manager itself (no routing mesh: ingress needs IPVS in the kernel);
# - the drain: `down` stops with a 90 s grace, more than --shutdown-timeout=60, so SIGTERM tears
#   every episode down, on every node, before the engine's SIGKILL.
# Env images are pushed to OPENENV_REGISTRY, which every node must pull from (an insecure registry
# needs "insecure-registries" in every node's daemon.json).
#
# Settings (environment):
#   DOCKER_HOST                  the manager's engine, as for the docker CLI (default: the local one)
#   DOCKER_SOCKET                that engine's socket path on the manager, mounted into the server
#                                (default /var/run/docker.sock)
#   OPENENV_IMAGE                the server image (default openenv-bundle-server:latest)
#   OPENENV_REGISTRY             required: HOST:PORT of a registry every node pulls from
#   OPENENV_BUNDLES_DIR          required: the folder holding the bundles on the manager (→ /bundles)
#   OPENENV_BUNDLE               the bundle to serve (default /bundles/gridsim-v1)
#   OPENENV_TOKEN_FILE           required: the file holding the bearer token on the manager (the
#                                server runs as uid 1000: the file must be readable by it)
#   OPENENV_PORT                 port published on the manager (default 8200)
#   OPENENV_PUBLISH_IP           address to publish on (default: every address of the manager)
#   OPENENV_MAX_CONCURRENT_ENVS  the cap (default 64; at most what the swarm can reserve at once)
#   OPENENV_INSTANCE             the instance name labelled on every env (default swarm)
#   OPENENV_BUILD_ARG            build arguments for the env images, space-separated KEY=VALUE
#                                (e.g. NODE_IMAGE=my/node:20 when the manager cannot pull node:20-slim)
#   OPENENV_NAME                 the container's name (default openenv-server)
set -euo pipefail

NAME="${OPENENV_NAME:-openenv-server}"

up() {
  : "${OPENENV_REGISTRY:?set OPENENV_REGISTRY to a registry every node pulls from}"
  : "${OPENENV_BUNDLES_DIR:?set OPENENV_BUNDLES_DIR to the folder holding the bundles on the manager}"
  : "${OPENENV_TOKEN_FILE:?set OPENENV_TOKEN_FILE to the file holding the token on the manager}"
  local publish="${OPENENV_PORT:-8200}:8200"
  [[ -n "${OPENENV_PUBLISH_IP:-}" ]] && publish="$OPENENV_PUBLISH_IP:$publish"
  docker run -d --name "$NAME" \
    --restart unless-stopped --stop-timeout 90 \
    --label io.openenv.deploy=swarm-manager \
    -v "${DOCKER_SOCKET:-/var/run/docker.sock}:/var/run/docker.sock" \
    --group-add "$(stat -c %g "${DOCKER_SOCKET:-/var/run/docker.sock}")" \
    -v "$OPENENV_BUNDLES_DIR:/bundles:ro" \
    -v "$OPENENV_TOKEN_FILE:/run/secrets/agentenv_token:ro" \
    -p "$publish" \
    -e "OPENENV_BUILD_ARG=${OPENENV_BUILD_ARG:-}" \
    "${OPENENV_IMAGE:-openenv-bundle-server:latest}" \
    "${OPENENV_BUNDLE:-/bundles/gridsim-v1}" \
    --host=0.0.0.0 --sandbox=swarm --registry="$OPENENV_REGISTRY" \
    --token-file=/run/secrets/agentenv_token --in-container=always \
    --max-concurrent-envs="${OPENENV_MAX_CONCURRENT_ENVS:-64}" --instance="${OPENENV_INSTANCE:-swarm}" \
    --shutdown-timeout=60
}

down() {
  if docker inspect "$NAME" >/dev/null 2>&1; then
    # SIGTERM drains; the exit code says whether it did (0)
    docker stop --time 90 "$NAME" >/dev/null
    echo "stopped $NAME (exit code $(docker inspect --format '{{.State.ExitCode}}' "$NAME"))"
    docker rm "$NAME" >/dev/null
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) docker ps -a --filter "name=^${NAME}\$" --format '{{.Names}}  {{.Status}}  {{.Ports}}' ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
