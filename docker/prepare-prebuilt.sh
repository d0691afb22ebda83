#!/usr/bin/env bash
# Fills docker/prebuilt/ for the Dockerfile's offline target `runtime-prebuilt`: a fresh compile of
# src/ and the production dependencies only, taken from this checkout's node_modules (so it needs
# no registry: run `npm ci` once first). The image then builds with no RUN step, from a base that
# has node alone (docker/make-local-node-base.sh):
#
#   bash docker/prepare-prebuilt.sh
#   docker build --target runtime-prebuilt --build-arg NODE_IMAGE=openenv-local/node:20 -t openenv-bundle-server .
#
# (compose.yaml: OPENENV_BUILD_TARGET=runtime-prebuilt NODE_IMAGE=openenv-local/node:20)
# Native modules come from the host, so the base must match the host's libc (the local base does:
# it is made from the host's node and libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docker/prebuilt
[[ -d node_modules ]] || { echo "error: no node_modules here: run npm ci first" >&2; exit 1; }
STAGE="$(mktemp -d "$OUT/.stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
# compile into the stage, not dist/: no stale files of removed sources, and a dist/ that others
# are using is left alone
node_modules/.bin/tsc -p tsconfig.json --outDir "$STAGE/dist" --declaration false --sourceMap true
# the web console's page (served at /web/)
node_modules/.bin/vite build -c web/vite.config.ts --outDir "$PWD/$STAGE/dist/web" --emptyOutDir --logLevel warn
cp package.json package-lock.json "$STAGE/"
# the toolbox (src/sandbox/toolbox.ts): this host's static busybox, which the server finds at toolbox/busybox
mkdir -p "$STAGE/toolbox"
busybox="${OPENENV_TOOLBOX:-/bin/busybox}"
# the server's own check (static, this machine's architecture), from the stage just compiled
node --input-type=module -e '
  const { findToolboxBinary } = await import(process.argv[1]);
  await findToolboxBinary(process.argv[2], process.arch === "x64" ? "x86_64" : process.arch);
' "$PWD/$STAGE/dist/sandbox/engine/toolbox-volume.js" "$busybox" || {
  echo "error: $busybox is no static busybox for the image's toolbox: apt-get install busybox-static (or set OPENENV_TOOLBOX)" >&2
  exit 1
}
cp "$busybox" "$STAGE/toolbox/busybox"
# the shipped harness (src/episodes/harness-task.ts SHIPPED_HARNESS), as the online target copies it
mkdir -p "$STAGE/harness"
cp harness/openenv_harness.py "$STAGE/harness/openenv_harness.py"
cp -a node_modules "$STAGE/node_modules"
(cd "$STAGE" && npm prune --omit=dev --offline --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
# empty scope folders of pruned packages
find "$STAGE/node_modules" -mindepth 1 -maxdepth 1 -type d -empty -delete
rm -rf "$OUT/app"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name .gitignore ! -name README.md ! -name "$(basename "$STAGE")" -exec rm -rf {} +
mv "$STAGE"/* "$OUT/"
echo "prepared $OUT: dist/ ($(find "$OUT/dist" -name '*.js' | wc -l) files), production node_modules ($(du -sh "$OUT/node_modules" | cut -f1))"
