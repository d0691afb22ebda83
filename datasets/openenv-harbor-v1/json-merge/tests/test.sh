#!/bin/bash
# The verifier: /app/config/merged.json holds the merged configuration, and merge.py merges the
# cases of cases/ as their expected files say (expected.json: the same JSON; expected.txt: that
# exact text). The agent's program runs, and its outputs are read, as `nobody`, which can neither
# read these tests nor write the reward; the reward is decided here (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }
# root's Python, on data only: -P keeps the script's folder off sys.path
same() { python3 -P /tests/same.py "$@"; }

reward=1
as_agent cat /app/config/merged.json > "$work/merged.json"
same json "$work/merged.json" /tests/merged.expected.json || reward=0
for case in /tests/cases/*/; do
  name=$(basename "$case")
  mkdir -p "$work/$name/out" && cp "$case/base.json" "$case/override.json" "$work/$name/" && chown 65534:65534 "$work/$name/out"
  as_agent python3 /app/merge.py "$work/$name/base.json" "$work/$name/override.json" "$work/$name/out/merged.json"
  as_agent cat "$work/$name/out/merged.json" > "$work/$name/got"
  if [ -f "$case/expected.txt" ]; then
    same text "$work/$name/got" "$case/expected.txt" || reward=0
  else
    same json "$work/$name/got" "$case/expected.json" || reward=0
  fi
done
echo "$reward" > /logs/verifier/reward.txt
