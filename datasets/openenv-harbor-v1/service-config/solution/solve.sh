#!/bin/bash
set -euo pipefail
chmod +x /app/bin/service.sh
mkdir -p /app/config
printf 'PORT=8080\nMODE=production\n' > /app/config/service.env
