"""Store-wide secrets of the doors (the dashboard's cookie-signing key), kept in the store's own
`secrets` table (SQLite `m013_secrets`, PostgreSQL `m005_secrets`), so a store reached by a
connection string has one as a file does, and every worker of every server of one store signs
alike.

A secret is made once, atomically (an insert that keeps an existing row, then a read in the
same transaction: two processes asking at once get the same value), and read only by
`Store.secret`: no listing, count, export, ledger, migration (`situated migrate` leaves it
behind: the target makes its own) or other read path touches the table. Like `meta`, the table
is store-wide, not per tenant: the dashboard serves every tenant of the store.
"""

from __future__ import annotations

import secrets

from situated.errors import InvalidInput, SituatedRuntimeError

NAMES = ("dashboard",)
"""The secrets a store keeps (`dashboard`: the dashboard's cookie-signing key)."""
MIN_CHARS = 32


def check_name(name: str) -> None:
    """InvalidInput naming `name` unless it is one of `NAMES`."""
    if name not in NAMES:
        raise InvalidInput("name", f"not a store secret: {name!r:.40} (one of {', '.join(NAMES)})")


def new_value() -> str:
    """A fresh secret: 256 random bits, hex."""
    return secrets.token_hex(32)


def checked(name: str, value: object) -> bytes:
    """The stored value as bytes; a loud failure if it cannot be a secret."""
    text = "" if value is None else str(value)
    if len(text) < MIN_CHARS:
        raise SituatedRuntimeError(f"the store's {name} secret is unusable (under {MIN_CHARS} "
                                   "characters)")
    return text.encode()
