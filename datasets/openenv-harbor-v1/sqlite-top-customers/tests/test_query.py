import sqlite3
import unittest


def run(db):
    with open("/app/query.sql") as f:
        return [tuple(r) for r in db.execute(f.read()).fetchall()]


class QueryTest(unittest.TestCase):
    def test_shop(self):
        db = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
        self.assertEqual(run(db), [("Brook", 100.0), ("Ada", 30.75), ("Cyd", 30.75)])

    def test_other_data(self):
        db = sqlite3.connect(":memory:")
        db.executescript("""
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, amount REAL NOT NULL);
        INSERT INTO customers VALUES (1, 'Zed'), (2, 'Yan'), (3, 'Xia'), (4, 'Wu');
        INSERT INTO orders (customer_id, amount) VALUES (1, 1.111), (2, 2), (3, 3), (4, 4), (4, 0.004);
        """)
        self.assertEqual(run(db), [("Wu", 4.0), ("Xia", 3.0), ("Yan", 2.0)])


if __name__ == "__main__":
    unittest.main()
