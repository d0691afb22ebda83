#!/bin/bash
# The verifier: /app/convert.py on conversions (their exact output, exit code 0) and on errors
# (exit code 2, nothing on stdout, stderr starting with `error:`). The agent's program runs as
# `nobody`, which can neither read these tests nor write the reward; its outputs and exit codes
# are compared here (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

failed=0
# converts WANT ARGS...: prints exactly WANT, exit code 0
converts() {
  local want=$1
  shift
  as_agent python3 /app/convert.py "$@" > "$work/out" 2> "$work/err"
  local code=$?
  if [ "$code" = 0 ] && printf '%s\n' "$want" | cmp -s - "$work/out"; then echo "ok: $*"; else echo "FAILED: $* (exit code $code)"; failed=1; fi
}
# refuses ARGS...: exit code 2, no stdout, stderr starting with error:
refuses() {
  as_agent python3 /app/convert.py "$@" > "$work/out" 2> "$work/err"
  local code=$?
  if [ "$code" = 2 ] && [ ! -s "$work/out" ] && [ "$(head -c 6 "$work/err")" = "error:" ]; then echo "ok: $*"; else echo "FAILED: $* (exit code $code)"; failed=1; fi
}
converts '212.00 F' 100 C F
converts '0.00 C' 32 F C
converts '-273.15 C' 0 K C
converts '-40.00 F' -40 C F
converts '80.33 F' 300 K F
converts '1.50 C' 1.5 C C
converts '298.15 K' 25 C K
refuses abc C F
refuses 10 X C
refuses -300 C K
refuses 1 C
reward=0
[ "$failed" = 0 ] && reward=1
echo "$reward" > /logs/verifier/reward.txt
