"""Compares two files the verifier read of the agent's: `same.py json A B` (the same JSON value)
or `same.py text A B` (the same text, but for trailing newlines). Exit 0 when they are the same.
Run by root on data only: it loads none of the agent's code."""
import json
import sys

kind, a, b = sys.argv[1:4]


def load(path):
    with open(path) as f:
        text = f.read()
    return json.loads(text) if kind == "json" else text.rstrip("\n")


try:
    same = load(a) == load(b)
except ValueError:
    same = False
print(f"{'same' if same else 'DIFFERENT'}: {a} {b}")
sys.exit(0 if same else 1)
