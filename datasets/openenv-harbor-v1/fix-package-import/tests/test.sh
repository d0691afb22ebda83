#!/bin/bash
# The verifier: the package imports from a fresh interpreter started in /app, and keeps its
# functions and version: each interpreter's output compared with what it must print. They import
# the agent's code, so they run as `nobody`, which can neither read these tests nor write the
# reward; the reward is decided here, from what they printed (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

# prints: CODE, run by a fresh python3 in /app, printed exactly WANT
prints() {
  local got
  got=$(cd /app && as_agent python3 -c "$1")
  if [ "$got" = "$2" ]; then echo "ok: $1"; else echo "FAILED: $1"; return 1; fi
}
reward=0
if prints "import textkit; print(textkit.shout('hi'))" 'HI!' \
  && prints "import textkit, textkit.format as f; print(textkit.VERSION, textkit.whisper('A'), f.banner('x'))" '1.2.0 a... textkit 1.2.0: x' \
  && prints "import textkit.format as f; print(f.shout('ok'))" 'OK!'; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
