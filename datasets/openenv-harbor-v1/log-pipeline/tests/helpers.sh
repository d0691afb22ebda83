# Shared by both steps' verifiers (the task's tests/ is merged into each step's). What the agent
# wrote is read, and its script run, as `nobody`, which can neither read these tests nor write the
# reward; the reward is decided here (docs/verifiers.md).
pass() { echo 1 > /logs/verifier/reward.txt; exit 0; }
fail() { echo 0 > /logs/verifier/reward.txt; exit 0; }
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }
