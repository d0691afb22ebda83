#!/bin/bash
# The verifier: the package imports from a fresh interpreter, and keeps its functions and version.
cd /app
if python3 -m unittest discover -v -s /tests -p 'test_*.py'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
