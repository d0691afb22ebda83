#!/bin/bash
# The verifier: the script's output on the sample and on a text the agent never saw, byte for byte.
reward=0
if [ -x /app/top_words.sh ] \
  && diff <(/app/top_words.sh /app/sample.txt) /tests/sample.expected \
  && diff <(/app/top_words.sh /tests/hidden.txt) /tests/hidden.expected; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
