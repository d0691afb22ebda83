#!/bin/bash
set -euo pipefail
awk '$2 == "ERROR"' /app/logs/app.log > /app/errors.txt
