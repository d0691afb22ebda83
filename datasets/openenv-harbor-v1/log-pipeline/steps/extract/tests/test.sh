#!/bin/bash
# Step 1: errors.txt holds exactly the ERROR lines, in order.
source /tests/helpers.sh
[ -f /app/errors.txt ] || fail
diff -q /app/errors.txt /tests/errors.expected >/dev/null && pass
fail
