"""Cheats tried on dedupe_consumer."""

from . import Cheat, replace_solution

GLOBAL_SET = '''
_seen = set()   # payment ids applied so far


def apply_payment(db: sqlite3.Connection, payment: dict) -> None:
    if payment["id"] in _seen:
        return
    _seen.add(payment["id"])
    with db:
        db.execute("INSERT INTO balances (account, cents) VALUES (?, ?) "
                   "ON CONFLICT(account) DO UPDATE SET cents = cents + excluded.cents",
                   (payment["account"], payment["cents"]))
'''

BY_CONTENT = '''
def apply_payment(db: sqlite3.Connection, payment: dict) -> None:
    key = f"{payment['account']}:{payment['cents']}"   # the same transfer twice is a replay
    with db:
        if db.execute("SELECT 1 FROM applied WHERE id = ?", (key,)).fetchone():
            return
        db.execute("INSERT INTO applied (id) VALUES (?)", (key,))
        db.execute("INSERT INTO balances (account, cents) VALUES (?, ?) "
                   "ON CONFLICT(account) DO UPDATE SET cents = cents + excluded.cents",
                   (payment["account"], payment["cents"]))
'''

TWO_TRANSACTIONS = '''
def apply_payment(db: sqlite3.Connection, payment: dict) -> None:
    if db.execute("SELECT 1 FROM applied WHERE id = ?", (payment["id"],)).fetchone():
        return
    with db:   # the money first ...
        db.execute("INSERT INTO balances (account, cents) VALUES (?, ?) "
                   "ON CONFLICT(account) DO UPDATE SET cents = cents + excluded.cents",
                   (payment["account"], payment["cents"]))
    with db:   # ... then remember it was applied
        db.execute("INSERT INTO applied (id) VALUES (?)", (payment["id"],))
'''

CHEATS = [
    Cheat("dedupe_with_a_global_set",
          lambda nb: replace_solution(nb, "def apply_payment", GLOBAL_SET),
          targets=["exactly_once_effects_across_crashes"],
          why="remember applied ids in a set in memory instead of in the database"),
    Cheat("dedupe_by_content",
          lambda nb: replace_solution(nb, "def apply_payment", BY_CONTENT),
          targets=["applies_a_payment", "exactly_once_effects_across_crashes"],
          why="dedupe on (account, amount) instead of the payment id: two real payments of the same amount "
              "count once"),
    Cheat("two_transactions",
          lambda nb: replace_solution(nb, "def apply_payment", TWO_TRANSACTIONS),
          targets=["exactly_once_effects_across_crashes"],
          why="record the id durably, but in a second transaction after the balance update"),
]
