import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), amount REAL NOT NULL);
INSERT INTO customers VALUES (1, 'Ada'), (2, 'Brook'), (3, 'Cyd'), (4, 'Dee'), (5, 'Eli');
INSERT INTO orders (customer_id, amount) VALUES (1, 10.5), (1, 20.25), (2, 99.99), (3, 5), (3, 25.75), (4, 30.75), (2, 0.01);
""")
db.commit()
