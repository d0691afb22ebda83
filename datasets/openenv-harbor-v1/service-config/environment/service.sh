#!/bin/bash
# A service that checks its configuration.
set -eu
conf=/app/config/service.env
[ -r "$conf" ] || { echo "no configuration at $conf" >&2; exit 1; }
# shellcheck disable=SC1090
. "$conf"
[ "${MODE:-}" = production ] || { echo "MODE must be production" >&2; exit 1; }
[[ "${PORT:-}" =~ ^[0-9]+$ ]] || { echo "PORT must be a number" >&2; exit 1; }
if [ "${1:-}" = --check ]; then echo "service ok: $MODE on $PORT"; exit 0; fi
echo "serving on $PORT"
