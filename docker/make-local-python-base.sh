#!/usr/bin/env bash
# Builds a Python base image from this machine's own `python3` (its binary, the shared libraries
# it and its extension modules link against, and its standard library), for machines that reach
# no container registry. Python env Dockerfiles (`openenv-bundle init --env python`) default to the
# public `python:3.12-slim` through `ARG PYTHON_IMAGE`; an offline machine passes
# `--build-arg PYTHON_IMAGE=<this image>`. The image has python3 and nothing else: no shell, no pip.
# Idempotent: an existing image with the same tag is rebuilt only when --force is given.
set -euo pipefail
TAG="${1:-openenv-local/python:3}"
if [[ "${2:-}" != "--force" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "local base image $TAG already present"
  exit 0
fi
# through the interpreter itself: `command -v python3` may be a shim (pyenv) rather than the binary
read -r PY_BIN PY_STDLIB PY_DYNLOAD PY_VER < <(python3 -c 'import sys, sysconfig; print(sys.executable, sysconfig.get_path("stdlib"), sysconfig.get_config_var("DESTSHARED"), "%d.%d" % sys.version_info[:2])')
PY_BIN="$(readlink -f "$PY_BIN")"
CTX="$(mktemp -d)"
trap 'rm -rf "$CTX"' EXIT
ROOT="$CTX/rootfs"
mkdir -p "$ROOT/usr/local/bin" "$ROOT/usr/local/lib/python$PY_VER" "$ROOT/tmp" "$ROOT/etc" "$ROOT/app"
cp "$PY_BIN" "$ROOT/usr/local/bin/python$PY_VER"
ln -s "python$PY_VER" "$ROOT/usr/local/bin/python3"
ln -s "python$PY_VER" "$ROOT/usr/local/bin/python"
# The standard library, less what an env never needs (tests, GUIs, installers, third-party packages).
tar -C "$PY_STDLIB" \
  --exclude=./site-packages --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
  --exclude=./ensurepip --exclude=./lib2to3 --exclude='./config-*' -cf - . | tar -C "$ROOT/usr/local/lib/python$PY_VER" -xf -
if [[ -n "$PY_DYNLOAD" && -d "$PY_DYNLOAD" && ! -d "$ROOT/usr/local/lib/python$PY_VER/lib-dynload" ]]; then
  cp -rL "$PY_DYNLOAD" "$ROOT/usr/local/lib/python$PY_VER/lib-dynload"
fi
# The shared libraries the interpreter and its extension modules link against, at the paths the
# dynamic loader expects (a libpython found through the binary's rpath stays where it was).
{
  ldd "$PY_BIN"
  find "$ROOT/usr/local/lib/python$PY_VER/lib-dynload" -name '*.so' -exec ldd {} \; 2>/dev/null
} | awk '/=>/ && $3 ~ /^\// {print $3} !/=>/ && $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  [[ -e "$lib" ]] || continue
  mkdir -p "$ROOT$(dirname "$lib")"
  cp -L "$lib" "$ROOT$lib"
done
printf 'root:x:0:0:root:/root:/bin/sh\npython:x:1000:1000:python:/home/python:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\npython:x:1000:\nnogroup:x:65534:\n' > "$ROOT/etc/group"
printf 'hosts: files dns\n' > "$ROOT/etc/nsswitch.conf"
chmod 1777 "$ROOT/tmp"
cat > "$CTX/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin PYTHONHOME=/usr/local PYTHONDONTWRITEBYTECODE=1 PYTHON_VERSION=local
WORKDIR /app
CMD ["python3"]
DOCKERFILE
docker build -q -t "$TAG" "$CTX"
echo "built local base image $TAG from $PY_BIN ($(python3 --version))"
