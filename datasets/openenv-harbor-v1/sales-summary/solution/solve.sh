#!/bin/bash
set -euo pipefail
cat > /app/summarize.py <<'EOF'
import csv
import json
import sys
from collections import Counter, defaultdict

revenue = defaultdict(float)
units = Counter()
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        n = int(row["units"])
        revenue[row["region"]] += n * float(row["unit_price"])
        units[row["product"]] += n
top = sorted(units.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
summary = {
    "revenue_by_region": {k: round(v, 2) for k, v in sorted(revenue.items())},
    "top_product": top,
    "total_units": sum(units.values()),
}
with open(sys.argv[2], "w") as f:
    json.dump(summary, f, indent=2)
EOF
python3 /app/summarize.py /app/data/sales.csv /app/summary.json
