#!/bin/bash
# The verifier: the names are right and every file still has its content, by the checksums these
# tests hold (a checksum file in the agent's folder is the agent's to rewrite). What the agent
# left is read as `nobody`, which can neither read these tests nor write the reward
# (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

reward=0
# each entry's kind and name: regular files only
got=$(as_agent find /app/photos -mindepth 1 -maxdepth 1 -printf '%y %f\n' | sort)
want=$(printf 'f %s\n' 2024-02-29_3.jpg 2025-12-24_17.jpg 2026-01-01_1.jpg 2026-01-01_2.jpg IMG_2026_bad.jpg notes.txt | sort)
if [ "$got" = "$want" ]; then
  ok=1
  while read -r sum name; do
    [ "$(as_agent cat "/app/photos/$name" | sha256sum | cut -d' ' -f1)" = "$sum" ] || { echo "changed: $name"; ok=0; }
  done < /tests/checksums
  reward=$ok
else
  printf 'found:\n%s\n' "$got"
fi
echo "$reward" > /logs/verifier/reward.txt
