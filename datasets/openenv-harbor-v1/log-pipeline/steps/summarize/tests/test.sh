#!/bin/bash
# Step 2: summary.txt is right, and summarize.sh gives the right answer on other input.
source /tests/helpers.sh
as_agent cat /app/summary.txt > "$work/summary.txt" && as_agent test -x /app/summarize.sh || fail
expected=$(printf 'E101 3\nE204 2\n')
[ "$(cat "$work/summary.txt")" = "$expected" ] || fail
[ "$(awk '{print $1}' "$work/summary.txt" | xargs)" = "$EXPECTED_CODES" ] || fail
cp /tests/more-errors.txt "$work/errors.txt"
printf '1\n' > "$work/threshold.txt"
[ "$(as_agent /app/summarize.sh "$work/errors.txt" "$work/threshold.txt")" = "$(printf 'E9 2\nE1 1\nE2 1')" ] && pass
fail
