#!/bin/bash
# The verifier: the script is unchanged and executable, the configuration as asked, the check passes.
reward=0
if sha256sum -c --status /app/.service.sum && [ -x /app/bin/service.sh ] \
  && grep -qx 'PORT=8080' /app/config/service.env && grep -qx 'MODE=production' /app/config/service.env \
  && [ "$(/app/bin/service.sh --check)" = "service ok: production on 8080" ]; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
