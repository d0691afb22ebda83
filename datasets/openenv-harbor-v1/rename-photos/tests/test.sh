#!/bin/bash
# The verifier: the names are right and every file still has its content (the image's checksums).
reward=0
cd /app/photos || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want="2024-02-29_3.jpg 2025-12-24_17.jpg 2026-01-01_1.jpg 2026-01-01_2.jpg IMG_2026_bad.jpg notes.txt"
got=$(ls -A | sort | xargs)
if [ "$got" = "$want" ]; then
  ok=1
  while read -r sum name; do
    new=$(echo "$name" | sed -E 's/^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]+)\.jpg$/\1-\2-\3_\4.jpg/')
    [ "$(sha256sum "$new" | cut -d' ' -f1)" = "$sum" ] || ok=0
  done < /app/.checksums
  reward=$ok
fi
echo "$reward" > /logs/verifier/reward.txt
