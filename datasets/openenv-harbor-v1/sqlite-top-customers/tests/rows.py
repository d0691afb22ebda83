"""Runs the agent's /app/query.sql on the shop's data (rebuilt here: /app/shop.db is the agent's
to change) and on other data, and prints the rows it returned, numbers as %.10g: no verdict here.
This process runs the agent's query, as `nobody`; the verifier compares its lines with
expected.txt, which this process cannot read."""
import sqlite3

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), amount REAL NOT NULL);
"""
DATA = {
    # as environment/make_db.py makes /app/shop.db
    "shop": """
    INSERT INTO customers VALUES (1, 'Ada'), (2, 'Brook'), (3, 'Cyd'), (4, 'Dee'), (5, 'Eli');
    INSERT INTO orders (customer_id, amount) VALUES (1, 10.5), (1, 20.25), (2, 99.99), (3, 5), (3, 25.75), (4, 30.75), (2, 0.01);
    """,
    "other": """
    INSERT INTO customers VALUES (1, 'Zed'), (2, 'Yan'), (3, 'Xia'), (4, 'Wu');
    INSERT INTO orders (customer_id, amount) VALUES (1, 1.111), (2, 2), (3, 3), (4, 4), (4, 0.004);
    """,
}


def cell(v):
    return format(float(v), ".10g") if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


with open("/app/query.sql") as f:
    query = f.read()
for name, rows in DATA.items():
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA + rows)
    try:
        got = [" | ".join(cell(v) for v in row) for row in db.execute(query).fetchall()]
    except sqlite3.Error as e:
        got = [f"error: {type(e).__name__}"]
    print(f"{name}: " + "; ".join(got), flush=True)
