"""The exercise notebook dedupe_consumer: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Exactly-once effects with an idempotent consumer", exercise="dedupe_consumer")

nb.md("""
# Exercise · Exactly-once effects with an idempotent consumer

A bank's consumer applies payments to account balances. It commits after processing, so after a
crash some payments are **delivered again** (at-least-once). Make applying a payment
*idempotent*, so replays change nothing and every balance ends up exactly right.

The grader runs an at-least-once consumer that calls your function in a process of its own, kills
it twice — each time at a moment when that leaves the database half updated, if there is one —
restarts it (so payments applied before the crash are delivered again), and compares every
balance with the expected total.

*About 25 minutes. Goes with lesson 06.*
""")
nb.md("""
## Setup
""")
nb.code("""
import sqlite3

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("dedupe_consumer")
""")
nb.md("""
## Task — `apply_payment(db, payment)`

`db` is an SQLite connection with two tables:

```sql
balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL)
applied  (id TEXT PRIMARY KEY)
```

A payment looks like `{"id": "pay-00042", "account": "acct-3", "cents": 142}`. Add its cents to
the account's balance — unless this payment id was applied before. The check and both writes
must happen **in one transaction** (`with db:`), or a crash between them breaks the balance.
""")
nb.code('''
def apply_payment(db: sqlite3.Connection, payment: dict) -> None:
    ### BEGIN SOLUTION
    with db:
        if db.execute("SELECT 1 FROM applied WHERE id = ?", (payment["id"],)).fetchone():
            return
        db.execute("INSERT INTO applied (id) VALUES (?)", (payment["id"],))
        db.execute("INSERT INTO balances (account, cents) VALUES (?, ?) "
                   "ON CONFLICT(account) DO UPDATE SET cents = cents + excluded.cents",
                   (payment["account"], payment["cents"]))
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
