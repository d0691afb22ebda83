#!/bin/bash
set -euo pipefail
cat > /app/convert.py <<'EOF'
import sys

TO_K = {"C": lambda v: v + 273.15, "F": lambda v: (v - 32) * 5 / 9 + 273.15, "K": lambda v: v}
FROM_K = {"C": lambda k: k - 273.15, "F": lambda k: (k - 273.15) * 9 / 5 + 32, "K": lambda k: k}


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


if len(sys.argv) != 4:
    fail("usage: convert.py VALUE FROM TO")
value, src, dst = sys.argv[1], sys.argv[2].upper(), sys.argv[3].upper()
try:
    v = float(value)
except ValueError:
    fail(f"not a number: {value}")
if src not in TO_K or dst not in FROM_K:
    fail("units are C, F and K")
k = TO_K[src](v)
if k < 0:
    fail("below absolute zero")
print(f"{FROM_K[dst](k):.2f} {dst}")
EOF
