#!/bin/bash
# The verifier: two scores in reward.json. "format": summary.json is a JSON object with exactly
# the three keys, of the right types. "correctness": its values are right, and summarize.py
# gives the right answer on data the agent never saw.
python3 /tests/check.py
