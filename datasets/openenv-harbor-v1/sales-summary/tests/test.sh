#!/bin/bash
# The verifier: two scores in reward.json. "format": summary.json is a JSON object with exactly
# the three keys, of the right types. "correctness": its values are right, and summarize.py
# gives the right answer on data the agent never saw. The agent's program runs, and its outputs
# are read, as `nobody`, which can neither read these tests nor write the reward; check.py scores
# them as root, loading none of the agent's code (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

as_agent cat /app/summary.json > "$work/summary.json"
cp /tests/hidden.csv "$work/sales.csv"
mkdir "$work/out" && chown 65534:65534 "$work/out"
as_agent python3 /app/summarize.py "$work/sales.csv" "$work/out/summary.json"
as_agent cat "$work/out/summary.json" > "$work/hidden.json"
# root's Python, on data only: -P keeps the script's folder off sys.path
python3 -P /tests/check.py "$work/summary.json" "$work/hidden.json"
