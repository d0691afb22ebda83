#!/bin/bash
set -euo pipefail
cd /app/photos
for f in IMG_*.jpg; do
  if [[ $f =~ ^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]+)\.jpg$ ]]; then
    mv -- "$f" "${BASH_REMATCH[1]}-${BASH_REMATCH[2]}-${BASH_REMATCH[3]}_${BASH_REMATCH[4]}.jpg"
  fi
done
