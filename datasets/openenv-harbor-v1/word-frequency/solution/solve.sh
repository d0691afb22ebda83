#!/bin/bash
set -euo pipefail
cat > /app/top_words.sh <<'EOF'
#!/bin/bash
tr -cs 'A-Za-z' '\n' < "$1" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2,2 | head -5 | awk '{print $1, $2}'
EOF
chmod +x /app/top_words.sh
