#!/bin/bash
# The verifier: runs backup.sh on a fresh /app/etc of awkward names and compares what it copied.
reward=0
rm -rf /app/etc /app/backup
mkdir -p /app/etc
for name in "plain.conf" "with space.conf" "two  spaces.conf" "-dash.conf" "notes.conf.bak" "conf" "x.config"; do
  printf '%s\n' "$name" > "/app/etc/$name"
done
if bash /app/backup.sh; then
  got=$(cd /app/backup && ls -A | sort)
  want=$(printf '%s\n' "-dash.conf" "plain.conf" "two  spaces.conf" "with space.conf" | sort)
  if [ "$got" = "$want" ] && [ "$(cat "/app/backup/with space.conf")" = "with space.conf" ]; then reward=1; fi
fi
echo "$reward" > /logs/verifier/reward.txt
