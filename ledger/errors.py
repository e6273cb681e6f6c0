"""The one exception hierarchy of the library.

Every error the library raises on purpose derives from :class:`LedgerError`, shaped after
the DB-API (one root, a few broad branches), so callers can catch as narrowly or as broadly
as they like::

    try:
        sink.commit_action(event)
    except NotSelfExplaining as exc:   # the record was refused; nothing was stored
        ...
    except LedgerError:                # anything else the ledger refused or could not do
        ...

Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "CallNotFound",
    "CanonicalizationError",
    "ConfigError",
    "CorruptRecord",
    "DuplicateEvent",
    "EventNotFound",
    "IntegrityError",
    "LedgerError",
    "NotSelfExplaining",
    "PayloadKeyError",
    "PersistError",
    "QueryError",
    "RecordError",
    "ReplayError",
    "RetentionError",
    "SchemaVersionError",
    "SinkClosed",
    "StorageError",
    "ToolDenied",
    "TypedLedgerError",
    "ValidationError",
]


class LedgerError(Exception):
    """Root of every error the library raises on purpose."""


# --- bad input -----------------------------------------------------------------------


class ValidationError(LedgerError, ValueError):
    """A value given to the library is malformed; the message names the field."""


class CanonicalizationError(ValidationError):
    """A value cannot be put in canonical JSON (NaN, huge integer, cycle, bad key...)."""


class NotSelfExplaining(ValidationError):
    """``commit_action`` refused an action record that cannot explain itself.

    ``problems`` lists every missing or wrong part; nothing was stored.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            "action record not self-explaining: "
            + "; ".join(problems)
            + " (fix the record; nothing was stored)"
        )


class CallNotFound(LedgerError, LookupError):
    """A chain has no action with the given call id."""


# --- storage -------------------------------------------------------------------------


class StorageError(LedgerError):
    """A sink or reader could not do what was asked of its storage."""


class DuplicateEvent(StorageError):
    """An event with this id is already stored; the stored one was left unchanged."""


class EventNotFound(StorageError, LookupError):
    """No event with the given id is stored."""


class RunNotFound(StorageError, LookupError):
    """No event of the given run id is stored: ``Reader.chain`` of an unknown (or
    deleted) run raises it rather than return an empty chain, which would look like a
    run that did nothing. ``ledger runs`` lists the runs there are."""


class CorruptRecord(StorageError):
    """A stored row or line does not parse as an event; the message names where it is.

    ``seq`` is the row's insertion sequence number when the store has one (the SQL
    sinks), so a reader can go on past it: ``events(..., after=exc.seq)``; ``event_id``
    is the id the row is stored under ("" when unknown).
    """

    def __init__(self, message: str, *, seq: int | None = None, event_id: str = "") -> None:
        super().__init__(message)
        self.seq = seq
        self.event_id = event_id


class SchemaVersionError(StorageError):
    """The database schema is newer than this code, or cannot be brought up to date."""


class SinkClosed(StorageError):
    """The sink was closed; open a new one to write again."""


# --- the tamper-evident log ---------------------------------------------------------


class IntegrityError(LedgerError):
    """Evidence failed verification; the message gives the precise reason.

    Raised when a Merkle inclusion or consistency proof does not lead to the expected
    root, when a signed note, checkpoint, key or cosignature is malformed, or when no
    trusted key signed it. Treat the data as untrusted: check that you verify against
    the right key, origin and tree head, fetch the proof or checkpoint again, and treat
    a failure that persists as evidence of tampering (keep the inputs for forensics).
    """


# --- retention, legal holds, erasure --------------------------------------------------


class RetentionError(LedgerError):
    """A retention rule refused the request (an erasure inside the floor or under a
    legal hold, a floor lowered without a signed change, an unknown hold or run);
    nothing was changed. The message names the rule and what to do."""


class PayloadKeyError(LedgerError):
    """The payload key of a crypto-shredding ledger is missing, wrong, or cannot be used
    (the message says which, and what to give instead)."""


# --- the gate ------------------------------------------------------------------------


class ToolDenied(LedgerError):
    """A tool call may not run. ``reason`` says why; the tool function did not run."""

    def __init__(self, reason: str, *, tool: str = "", call_id: str = "") -> None:
        self.reason = reason
        self.tool = tool
        self.call_id = call_id
        super().__init__(reason)


# --- typed ledgers -------------------------------------------------------------------


class TypedLedgerError(LedgerError):
    """Base of the typed-ledger errors."""


class ConfigError(TypedLedgerError, ValueError):
    """The typed-ledger configuration is invalid."""


class RecordError(TypedLedgerError, ValueError):
    """A typed-ledger record or envelope is invalid."""


class ReplayError(TypedLedgerError):
    """Replaying a typed ledger failed; the message names the record."""


class PersistError(TypedLedgerError):
    """Persisting a transaction artifact failed; nothing was written."""


class QueryError(TypedLedgerError, ValueError):
    """A typed-ledger query is invalid or was refused."""
