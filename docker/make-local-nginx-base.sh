#!/usr/bin/env bash
# Builds an nginx image from this machine's own `nginx` binary (Debian's `nginx` package), for
# machines that reach no container registry: the compose file's `tls` profile defaults to the
# public `nginx` image and an offline machine sets PROXY_IMAGE=<this image>. FROM scratch: the
# binary, the libraries it links against, and the users and folders nginx expects. No shell.
# It serves only a config that is mounted into it (deploy/nginx/nginx.conf).
# Idempotent: an existing image with the same tag is rebuilt only when --force is given.
set -euo pipefail
TAG="${1:-openenv-local/nginx:1}"
if [[ "${2:-}" != "--force" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "local nginx image $TAG already present"
  exit 0
fi
NGINX_BIN="$(command -v nginx || true)"
[[ -n "$NGINX_BIN" ]] || NGINX_BIN=/usr/sbin/nginx
if [[ ! -x "$NGINX_BIN" ]]; then
  echo "error: no nginx binary on this machine: apt-get install -y nginx" >&2
  exit 1
fi
NGINX_BIN="$(readlink -f "$NGINX_BIN")"
CTX="$(mktemp -d)"
trap 'rm -rf "$CTX"' EXIT
R="$CTX/rootfs"
mkdir -p "$R/usr/sbin" "$R/tmp" "$R/etc/nginx" "$R/var/lib/nginx" "$R/var/log/nginx" "$R/run" "$R/var/lock"
cp "$NGINX_BIN" "$R/usr/sbin/nginx"
# The shared libraries nginx links against, at the paths the dynamic loader expects.
ldd "$NGINX_BIN" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
  [[ -e "$lib" ]] || continue
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
# getpwnam/getgrnam go through NSS: the `files` backend is a library glibc loads at run time.
for lib in /lib/x86_64-linux-gnu/libnss_files.so.2 /usr/lib/x86_64-linux-gnu/libnss_files.so.2 /lib/aarch64-linux-gnu/libnss_files.so.2 /usr/lib/aarch64-linux-gnu/libnss_files.so.2; do
  [[ -e "$lib" ]] && mkdir -p "$R$(dirname "$lib")" && cp -L "$lib" "$R$lib"
done
# `nginx` is the worker user of the official image too, so one config serves both images.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnginx:x:101:101:nginx:/nonexistent:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > "$R/etc/passwd"
printf 'root:x:0:\nnginx:x:101:\nnogroup:x:65534:\n' > "$R/etc/group"
printf 'hosts: files dns\npasswd: files\ngroup: files\n' > "$R/etc/nsswitch.conf"
[[ -f /etc/nginx/mime.types ]] && cp /etc/nginx/mime.types "$R/etc/nginx/mime.types"
chmod 1777 "$R/tmp"
cat > "$CTX/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
DOCKERFILE
docker build -q -t "$TAG" "$CTX"
echo "built local nginx image $TAG from $NGINX_BIN ($("$NGINX_BIN" -v 2>&1))"
