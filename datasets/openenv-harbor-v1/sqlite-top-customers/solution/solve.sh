#!/bin/bash
set -euo pipefail
cat > /app/query.sql <<'EOF'
SELECT c.name, ROUND(SUM(o.amount), 2) AS total
FROM customers c JOIN orders o ON o.customer_id = c.id
GROUP BY c.id
ORDER BY total DESC, c.name
LIMIT 3;
EOF
