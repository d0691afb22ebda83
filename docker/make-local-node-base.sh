#!/usr/bin/env bash
# Builds a Node base image from this machine's own `node` binary, for machines that reach no
# container registry. Every Dockerfile of this project defaults to the public `node:20-slim`
# through `ARG NODE_IMAGE`; an offline machine passes `--build-arg NODE_IMAGE=<this image>`.
# Idempotent: an existing image with the same tag is rebuilt only when --force is given.
set -euo pipefail
TAG="${1:-openenv-local/node:20}"
if [[ "${2:-}" != "--force" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "local base image $TAG already present"
  exit 0
fi
NODE_BIN="$(readlink -f "$(command -v node)")"
CTX="$(mktemp -d)"
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/rootfs/usr/local/bin" "$CTX/rootfs/tmp" "$CTX/rootfs/etc" "$CTX/rootfs/app"
cp "$NODE_BIN" "$CTX/rootfs/usr/local/bin/node"
# The shared libraries node links against, at the paths the dynamic loader expects.
ldd "$NODE_BIN" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
  [[ -e "$lib" ]] || continue
  mkdir -p "$CTX/rootfs$(dirname "$lib")"
  cp -L "$lib" "$CTX/rootfs$lib"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' > "$CTX/rootfs/etc/passwd"
printf 'root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n' > "$CTX/rootfs/etc/group"
printf 'hosts: files dns\n' > "$CTX/rootfs/etc/nsswitch.conf"
[[ -d /etc/ssl/certs ]] && mkdir -p "$CTX/rootfs/etc/ssl" && cp -rL /etc/ssl/certs "$CTX/rootfs/etc/ssl/" 2>/dev/null || true
chmod 1777 "$CTX/rootfs/tmp"
cat > "$CTX/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin NODE_VERSION=local
WORKDIR /app
CMD ["node"]
DOCKERFILE
docker build -q -t "$TAG" "$CTX"
echo "built local base image $TAG from $NODE_BIN ($(node --version))"
