"""Calls /app/stats.py and prints what each call gave, one line each, numbers as %.10g: no
verdict here. This process runs the agent's code, as `nobody`; the verifier compares its lines
with expected.txt, which this process cannot read."""
import sys


def show(label, call):
    try:
        value = call()
    except Exception as e:  # a wrong answer like any other
        value = f"raised {type(e).__name__}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = format(float(value), ".10g")
    print(f"{label}: {value}", flush=True)


def median_leaves(values):
    stats.median(values)
    return values


sys.path.insert(0, "/app")
import stats  # noqa: E402

show("median odd unsorted", lambda: stats.median([5, 1, 3]))
show("median even", lambda: stats.median([4, 1, 3, 2]))
show("median single", lambda: stats.median([7]))
show("median even with negatives", lambda: stats.median([-1, 10, 4, 7]))
show("median floats", lambda: stats.median([2.5, 0.5, 1.5]))
show("median leaves its input", lambda: median_leaves([3, 1, 2]))
show("mean", lambda: stats.mean([1, 2, 3]))
show("spread", lambda: stats.spread([4, 9, 1]))
