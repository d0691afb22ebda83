#!/bin/bash
# The verifier: runs backup.sh on a fresh /app/etc of awkward names and compares what it copied.
# The agent's script runs, and what it left is read, as `nobody`, which can neither read these
# tests nor write the reward (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

reward=0
# /app is the agent's: root writes into it only when it is a real folder
if [ -d /app ] && [ ! -L /app ]; then
  rm -rf /app/etc /app/backup
  mkdir -p /app/etc /app/backup && chown 65534:65534 /app/backup
  for name in "plain.conf" "with space.conf" "two  spaces.conf" "-dash.conf" "notes.conf.bak" "conf" "x.config"; do
    printf '%s\n' "$name" > "/app/etc/$name"
  done
  as_agent bash /app/backup.sh
  # each entry's kind and name: regular files only
  got=$(as_agent find /app/backup -mindepth 1 -printf '%y %P\n' | sort)
  want=$(printf 'f %s\n' "-dash.conf" "plain.conf" "two  spaces.conf" "with space.conf" | sort)
  if [ "$got" = "$want" ] && [ "$(as_agent cat "/app/backup/with space.conf")" = "with space.conf" ]; then reward=1; fi
fi
echo "$reward" > /logs/verifier/reward.txt
