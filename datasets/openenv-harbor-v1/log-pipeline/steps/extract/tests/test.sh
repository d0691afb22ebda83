#!/bin/bash
# Step 1: errors.txt holds exactly the ERROR lines, in order.
source /tests/helpers.sh
as_agent cat /app/errors.txt > "$work/errors.txt" || fail
cmp -s "$work/errors.txt" /tests/errors.expected && pass
fail
