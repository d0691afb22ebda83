#!/bin/bash
set -euo pipefail
cat > /app/backup.sh <<'EOF'
#!/bin/bash
# Copies the configuration files of /app/etc into /app/backup.
mkdir -p /app/backup
shopt -s nullglob
for f in /app/etc/*.conf; do
  cp -- "$f" /app/backup/
done
EOF
chmod +x /app/backup.sh
