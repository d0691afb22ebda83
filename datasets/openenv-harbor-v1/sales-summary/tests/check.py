"""The scores, from two files the verifier read of the agent's (as `nobody`): its summary.json,
and what its summarize.py wrote for hidden.csv. Run by root on data only: it loads none of the
agent's code, and writes reward.json."""
import json
import sys

EXPECTED = {"revenue_by_region": {"east": 57.48, "north": 35.0, "south": 41.0}, "top_product": "widget", "total_units": 27}
HIDDEN_EXPECTED = {"revenue_by_region": {"west": 30.0, "north": 4.5}, "top_product": "bolt", "total_units": 18}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):
        return None


def well_formed(s):
    return (
        isinstance(s, dict)
        and set(s) == {"revenue_by_region", "top_product", "total_units"}
        and isinstance(s["revenue_by_region"], dict)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in s["revenue_by_region"].values())
        and isinstance(s["top_product"], str)
        and isinstance(s["total_units"], int)
        and not isinstance(s["total_units"], bool)
    )


def same(a, b):
    if not well_formed(a):
        return False
    ra, rb = a["revenue_by_region"], b["revenue_by_region"]
    return set(ra) == set(rb) and all(abs(ra[k] - rb[k]) < 0.005 for k in rb) and a["top_product"] == b["top_product"] and a["total_units"] == b["total_units"]


summary, hidden = load(sys.argv[1]), load(sys.argv[2])
fmt = 1 if well_formed(summary) else 0
correct = 1 if same(summary, EXPECTED) and same(hidden, HIDDEN_EXPECTED) else 0
print(f"format={fmt} correctness={correct}")
with open("/logs/verifier/reward.json", "w") as f:
    json.dump({"correctness": correct, "format": fmt}, f)
