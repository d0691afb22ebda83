#!/bin/bash
set -euo pipefail
cat > /app/summarize.sh <<'EOF'
#!/bin/bash
min=$(tr -dc '0-9' < "$2")
awk '{print $3}' "$1" | sort | uniq -c | awk -v min="$min" '$1 >= min {print $2, $1}' | sort -k2,2nr -k1,1
EOF
chmod +x /app/summarize.sh
/app/summarize.sh /app/errors.txt /app/threshold.txt > /app/summary.txt
