#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
import re
path = "/app/stats.py"
src = open(path).read()
fixed = """def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
"""
src = re.sub(r"def median\(values\):\n(?:    .*\n)+", fixed, src)
open(path, "w").write(src)
EOF
