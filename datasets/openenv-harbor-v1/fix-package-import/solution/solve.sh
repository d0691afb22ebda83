#!/bin/bash
set -euo pipefail
cat > /app/textkit/version.py <<'EOF'
VERSION = "1.2.0"
EOF
cat > /app/textkit/__init__.py <<'EOF'
"""Small text helpers."""
from textkit.version import VERSION
from textkit.format import shout, whisper

__all__ = ["VERSION", "shout", "whisper"]
EOF
sed -i 's/^from textkit import VERSION$/from textkit.version import VERSION/' /app/textkit/format.py
