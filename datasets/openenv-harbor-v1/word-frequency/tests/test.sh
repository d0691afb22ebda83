#!/bin/bash
# The verifier: the script's output on the sample and on a text the agent never saw, byte for
# byte (the hidden text decides: a sample the agent rewrote gains it nothing). The agent's script
# runs as `nobody`, which can neither read these tests (the expected outputs) nor write the
# reward; its inputs are copies, named for nothing (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

as_agent cat /app/sample.txt > "$work/a.txt"
cp /tests/hidden.txt "$work/b.txt"
reward=0
if as_agent test -x /app/top_words.sh; then
  as_agent /app/top_words.sh "$work/a.txt" > "$work/a.out"
  as_agent /app/top_words.sh "$work/b.txt" > "$work/b.out"
  if diff "$work/a.out" /tests/sample.expected && diff "$work/b.out" /tests/hidden.expected; then reward=1; fi
fi
echo "$reward" > /logs/verifier/reward.txt
