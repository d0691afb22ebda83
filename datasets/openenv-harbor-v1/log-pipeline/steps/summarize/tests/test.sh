#!/bin/bash
# Step 2: summary.txt is right, and summarize.sh gives the right answer on other input.
source /tests/helpers.sh
[ -f /app/summary.txt ] && [ -x /app/summarize.sh ] || fail
expected=$(printf 'E101 3\nE204 2\n')
[ "$(cat /app/summary.txt)" = "$expected" ] || fail
[ "$(awk '{print $1}' /app/summary.txt | xargs)" = "$EXPECTED_CODES" ] || fail
printf '1\n' > /tmp/t1
[ "$(/app/summarize.sh /tests/more-errors.txt /tmp/t1)" = "$(printf 'E9 2\nE1 1\nE2 1')" ] && pass
fail
