#!/bin/bash
# The verifier: /app/query.sql run on the shop's data and on other data (rows.py), the rows it
# returned compared with expected.txt. The agent's query runs in a process of its own, as
# `nobody`, which can neither read these tests nor write the reward; the reward is decided here,
# from what that process printed (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

cp /tests/rows.py "$work/rows.py"
as_agent python3 "$work/rows.py" > "$work/got.txt"
reward=0
if diff "$work/got.txt" /tests/expected.txt; then reward=1; fi
echo "$reward" > /logs/verifier/reward.txt
