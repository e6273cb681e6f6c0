"""Retention, legal holds and erasure that keep the tamper-evident log verifiable.

>>> from ledger.retention import Retention, Selection, parse_duration
>>> parse_duration("180d").days
180
>>> with open_sink("sqlite:///ledger.db") as sink:                     # doctest: +SKIP
...     Retention(sink).erase(Selection.of_run("r-12"), reason="GDPR Art. 17 #42")

The rules are pure (:mod:`.rules`: durations, the policy's keep and floor, legal holds);
the tombstone and the erasure digest are the model's (:mod:`ledger.model.erasure`), so
readers and ``ledger verify`` read them too; :mod:`.records` says how each change is
recorded in the log itself; :mod:`.store` applies them to a SQL ledger in one
transaction per change; :mod:`.vacuum` reclaims space. See ``docs/retention.md``.
"""

from __future__ import annotations

from ledger.errors import RetentionError
from ledger.model.erasure import ALL_FIELDS, KEPT_FIELDS, Erasure
from ledger.retention.records import ADMIN_RUN_PREFIX, is_admin_run
from ledger.retention.rules import Hold, Policy, parse_date, require_reason
from ledger.retention.store import (
    ErasureOutcome,
    ErasureRecord,
    PolicyState,
    Retention,
    Selected,
    Selection,
    operator,
)
from ledger.timefmt import format_duration, parse_duration

__all__ = [
    "ADMIN_RUN_PREFIX",
    "ALL_FIELDS",
    "KEPT_FIELDS",
    "Erasure",
    "ErasureOutcome",
    "ErasureRecord",
    "Hold",
    "Policy",
    "PolicyState",
    "Retention",
    "RetentionError",
    "Selected",
    "Selection",
    "format_duration",
    "is_admin_run",
    "operator",
    "parse_date",
    "parse_duration",
    "require_reason",
]
