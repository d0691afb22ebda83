#!/bin/bash
set -euo pipefail
cat > /app/merge.py <<'EOF'
import json
import sys


def merge(base, override):
    out = dict(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


with open(sys.argv[1]) as f:
    base = json.load(f)
with open(sys.argv[2]) as f:
    override = json.load(f)
with open(sys.argv[3], "w") as f:
    json.dump(merge(base, override), f, sort_keys=True, indent=2)
EOF
python3 /app/merge.py /app/config/base.json /app/config/override.json /app/config/merged.json
