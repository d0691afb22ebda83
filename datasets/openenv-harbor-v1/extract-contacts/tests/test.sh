#!/bin/bash
# The verifier: contacts.txt is exactly the expected list.
if diff /app/contacts.txt /tests/contacts.expected; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
