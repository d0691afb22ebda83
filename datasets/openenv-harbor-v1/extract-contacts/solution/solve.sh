#!/bin/bash
set -euo pipefail
grep -ohE '[A-Za-z0-9_.%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}' /app/inbox/*.txt | tr 'A-Z' 'a-z' | sort -u > /app/contacts.txt
