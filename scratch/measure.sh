#!/bin/bash
# runs under flock: each row's time is inside the lock
cd /work/wt/check-fast
B=--build-arg; BA=NODE_IMAGE=openenv-local/node:20
row() { # label, args...
  local label=$1; shift
  local s=$(date +%s.%N); local l0=$(cut -d' ' -f1 /proc/loadavg); local p0=$(($(docker ps | wc -l)-1))
  node dist/cli/openenv-bundle.js check bundles/gridsim-v1 "$@" $B $BA > /tmp/cf-out.txt 2>/dev/null; local rc=$?
  local e=$(date +%s.%N); local l1=$(cut -d' ' -f1 /proc/loadavg); local p1=$(($(docker ps | wc -l)-1))
  echo "$label | rc=$rc | wall $(echo "$e - $s" | bc) s | load $l0 -> $l1 | containers $p0 -> $p1 | $(grep -E 'plays:|played ' /tmp/cf-out.txt | tr '\n' ' ')"
}
echo "start $(date -u +%T)"
for c in 2 4 8 16; do row "all c=$c" --tasks all --concurrency $c; done
for c in 2 4 8; do row "fresh eval/40 c=$c" --split eval --tasks 40 --concurrency $c --fresh-envs; done
row "all c=8 again" --tasks all --concurrency 8
echo "end $(date -u +%T)"
