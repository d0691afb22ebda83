#!/bin/bash
# The verifier: the script is unchanged (by the checksum these tests hold: /app/.service.sum is
# the agent's to rewrite) and executable, the configuration as asked, the check passes. What the
# agent left is read, and the service (which sources the agent's configuration) run, as `nobody`,
# which can neither read these tests nor write the reward (docs/verifiers.md).
chmod 0700 /tests || exit 1
chmod 0755 /logs/verifier || exit 1
work=$(mktemp -d) && chmod 0755 "$work" && cd "$work" || exit 1
as_agent() { timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs -- "$@"; }

# environment/service.sh, as the image ships it
SERVICE_SHA256=2cd4b1fbd2e4bd6f5818de188857e7bc3458d01c17f78117821f863eb94e0e96
reward=0
if [ "$(as_agent cat /app/bin/service.sh | sha256sum | cut -d' ' -f1)" = "$SERVICE_SHA256" ] && as_agent test -x /app/bin/service.sh \
  && as_agent cat /app/config/service.env > "$work/service.env" \
  && grep -qx 'PORT=8080' "$work/service.env" && grep -qx 'MODE=production' "$work/service.env" \
  && [ "$(as_agent /app/bin/service.sh --check)" = "service ok: production on 8080" ]; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
