"""What ``ledger typed check`` reports: per ledger, what replay would make of it.

::

    for finding in check_ledgers(config, store):
        finding.name, finding.ignored_keywords, finding.records, finding.warnings

Without a store, only the configuration is looked at: ``ignored_keywords`` lists the
schema keywords the reference engine does not enforce when it replays or persists (its
subset validator, :mod:`ledger.typed.refschema`), so values it accepted may break them;
this library still enforces them on everything it writes. With a store, each ledger is
read too: its record count, its diagnostics (which make replay fail closed) and its
warnings (findings the reference accepts silently, such as a record repeated inside one
shard file, which replay deduplicates).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.typed.config import LedgerConfig
from ledger.typed.reconstruct import Diagnostic
from ledger.typed.refschema import ignored_keywords
from ledger.typed.storage import LedgerStore

__all__ = ["LedgerCheck", "check_ledgers"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerCheck:
    """One ledger's findings; ``records`` and the diagnostics are ``None`` without a store."""

    name: str
    ignored_keywords: tuple[str, ...]
    records: int | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    warnings: tuple[Diagnostic, ...] | None = None

    @property
    def ok(self) -> bool:
        """True when the ledger would replay (no diagnostics; warnings do not count)."""
        return not self.diagnostics


def check_ledgers(config: LedgerConfig, store: LedgerStore | None = None) -> list[LedgerCheck]:
    """The findings of every configured ledger, in configuration order."""
    found = []
    for ledger in config.ledgers:
        ignored = tuple(ignored_keywords(ledger.schema)) if ledger.schema is not None else ()
        if store is None:
            found.append(LedgerCheck(name=ledger.name, ignored_keywords=ignored))
            continue
        rec = store.read(ledger.name)
        found.append(
            LedgerCheck(
                name=ledger.name,
                ignored_keywords=ignored,
                records=len(rec.records),
                diagnostics=rec.diagnostics,
                warnings=rec.warnings,
            )
        )
    return found
