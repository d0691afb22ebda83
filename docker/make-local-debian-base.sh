#!/usr/bin/env bash
# Builds a Debian base image with bash, coreutils, apt and python3, for machines that reach no
# container registry but do reach Debian's package archive: debootstrap's minbase variant unpacks
# Debian into a folder, which `docker import` turns into an image. Harbor-format tasks (and the
# shipped dataset, datasets/openenv-harbor-v1) build FROM it: `openenv-bundle import harbor
# --base-image debian:bookworm=openenv-local/debian:bookworm` maps their public bases to it.
# The image keeps apt's sources, so a Dockerfile's `RUN apt-get install` works where the archive
# is reachable. Needs root (debootstrap chroots); installs debootstrap with apt when it is missing.
# Idempotent: an existing image with the same tag is rebuilt only when --force is given.
#   bash docker/make-local-debian-base.sh [TAG] [--force]
# Environment: OPENENV_DEBIAN_MIRROR (default http://deb.debian.org/debian), OPENENV_DEBIAN_SUITE
# (default bookworm).
set -euo pipefail
TAG="${1:-openenv-local/debian:bookworm}"
if [[ "${2:-}" != "--force" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "local base image $TAG already present"
  exit 0
fi
MIRROR="${OPENENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${OPENENV_DEBIAN_SUITE:-bookworm}"
if [[ $EUID -ne 0 ]]; then
  echo "error: debootstrap needs root to build $TAG (run this script as root)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
WORK="$(mktemp -d)"
ROOT="$WORK/rootfs"
cleanup() {
  # a debootstrap that failed half-way may leave its chroot's kernel file systems mounted
  for m in proc sys dev/pts dev; do umount -l "$ROOT/$m" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
started=$SECONDS
echo "debootstrap $SUITE (minbase + python3) from $MIRROR"
if ! debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
  tail -30 "$WORK/debootstrap.log" >&2
  [[ -f "$ROOT/debootstrap/debootstrap.log" ]] && tail -30 "$ROOT/debootstrap/debootstrap.log" >&2
  echo "error: debootstrap failed (is $MIRROR reachable?)" >&2
  exit 1
fi
# what an image needs not carry: downloaded packages, package lists (apt-get update fetches them
# again), logs and caches
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/* "$ROOT"/tmp/* "$ROOT"/var/tmp/*
find "$ROOT/usr/lib" -name __pycache__ -type d -prune -exec rm -rf {} +
mkdir -p "$ROOT/app"
# the chroot's resolver file is the host's: containers get their own from the engine
: >"$ROOT/etc/resolv.conf"
tar --numeric-owner -C "$ROOT" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'WORKDIR /app' \
  --change 'CMD ["bash"]' \
  - "$TAG" >/dev/null
echo "built local base image $TAG ($SUITE minbase, $(chroot "$ROOT" python3 --version 2>&1), bash $(chroot "$ROOT" bash -c 'echo $BASH_VERSION')) in $((SECONDS - started)) s"
