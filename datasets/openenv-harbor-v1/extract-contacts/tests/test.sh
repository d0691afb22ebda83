#!/bin/bash
# The verifier: contacts.txt is exactly the expected list. The agent's output is read as `nobody`,
# which can neither read these tests nor write the reward: a link from contacts.txt to the
# expected list reads nothing (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

as_agent cat /app/contacts.txt > "$work/contacts.txt"
reward=0
if diff "$work/contacts.txt" /tests/contacts.expected; then reward=1; fi
echo "$reward" > /logs/verifier/reward.txt
