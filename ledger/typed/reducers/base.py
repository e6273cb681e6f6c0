"""Shared pieces of the built-in reducers: operation fields, errors, table shapes.

Every reducer validates an operation completely before it changes any state, so a
rejected operation leaves the state as it was (the counter range check relies on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ledger.errors import CanonicalizationError, RecordError, ReplayError
from ledger.typed.jsontext import canonical_json, utf8_len
from ledger.typed.records import MAX_SAFE_INTEGER, Record
from ledger.typed.refschema import reference_error
from ledger.typed.schema import compile_schema, first_error

__all__ = [
    "MAX_CELL_BYTES",
    "OPERATIONS",
    "OperationError",
    "Reducer",
    "TableSpec",
    "check_operation",
    "js_order",
    "safe_integer",
    "value_text",
]

MAX_CELL_BYTES: Final = 65_536

OPERATIONS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "log": {"append": ("value",)},
    "set": {"add": ("value",), "remove": ("value",)},
    "map": {"put": ("key", "value"), "delete": ("key",)},
    "table": {
        "insert": ("value",),
        "update": ("key", "patch"),
        "upsert": ("value",),
        "delete": ("key",),
    },
    "counter": {"increment": ("name", "amount"), "decrement": ("name", "amount")},
    "notes": {"note": ("subject", "note", "reason", "citations"), "vote": ("note_id", "vote")},
}
_OPTIONAL: Final[Mapping[str, frozenset[str]]] = {"vote": frozenset({"reason"})}


class OperationError(ReplayError, RecordError):
    """An operation is invalid for its ledger; the message starts with the reference's.

    It is a :class:`ReplayError` (raised by replay) and a :class:`RecordError` (raised
    when a request is validated before it is written).
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSpec:
    """One output table: ``columns`` as ``(name, type)`` pairs (types ``text`` or
    ``integer``) and the ``primary_key`` column names."""

    name: str
    columns: tuple[tuple[str, str], ...]
    primary_key: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(name for name, _ in self.columns)


def js_order(text: str) -> bytes:
    """Sort key giving JavaScript's string order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def safe_integer(value: object) -> int | None:
    """``value`` as an int when it is a JS safe integer (no bools, no strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    else:
        return None
    return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else None


def value_text(value: object) -> str:
    """Canonical JSON of a ledger value, or :class:`OperationError` (``finite``)."""
    try:
        return canonical_json(value)
    except CanonicalizationError as exc:
        raise OperationError(f"Ledger value must be finite, acyclic JSON: {exc}") from None


def check_operation(ledger_type: str, payload: object) -> str:
    """Check the operation name and exact field set; return the operation name.

    >>> check_operation("log", {"operation": "append", "value": 1})
    'append'
    """
    operations = OPERATIONS.get(ledger_type)
    if operations is None:
        raise OperationError(f"Unknown built-in ledger type {ledger_type!r}")
    operation = payload.get("operation") if isinstance(payload, dict) else None
    if not isinstance(operation, str) or operation not in operations:
        raise OperationError(
            f"Unsupported ledger operation {operation!r} for a {ledger_type} ledger "
            f"(supported: {', '.join(operations)})",
        )
    assert isinstance(payload, dict)
    required = frozenset(operations[operation])
    allowed = required | _OPTIONAL.get(operation, frozenset()) | {"operation", "id"}
    keys = payload.keys()
    if not required <= keys or not keys <= allowed:
        raise OperationError(
            f"Invalid ledger operation fields for {operation}: need exactly "
            f"{sorted(required | {'operation'})} (got {sorted(keys)})",
        )
    # payload.id: the reference checks it for notes only ("Invalid note record ID"); for the
    # other types any JSON value is replayed as it is (this library writes final ids there)
    if ledger_type == "notes" and "id" in payload:
        payload_id = payload["id"]
        if not isinstance(payload_id, str) or not payload_id or utf8_len(payload_id) > 128:
            raise OperationError("Invalid note record ID: it must be a string of 1 to 128 bytes")
    return operation


class Reducer:
    """Base of the built-in reducers: ``apply`` each record, then ``output`` the tables."""

    ledger_type: str = ""
    specs: tuple[TableSpec, ...] = ()

    #: ``False`` (replay): values are checked as the reference checks them
    #: (:mod:`ledger.typed.refschema`); ``True`` (the write path): full Draft 2020-12,
    #: and the reference's check as well (an object in an ``enum`` passes the first only).
    strict_schema: bool = False

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        self._schema = schema
        self._validator = compile_schema(schema) if schema is not None else None
        self.key = key

    def check_value(self, value: object) -> str:
        """The canonical text of ``value`` after the schema accepted it."""
        text = value_text(value)
        if self._schema is not None:
            problem = None
            if self.strict_schema and self._validator is not None:
                problem = first_error(self._validator, value)
            if problem is None:  # on write too: nothing the reference's replay would refuse
                problem = reference_error(value, self._schema)
            if problem is not None:
                raise OperationError(f"Ledger value does not match schema: {problem}")
        return text

    def apply(self, record: Record) -> None:
        """Validate and apply one record; raises :class:`OperationError`."""
        payload = record.payload
        operation = check_operation(self.ledger_type, payload)
        self.apply_operation(operation, payload, record)

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        """Stateless checks of one operation's fields (values, schema, bounds)."""
        raise NotImplementedError

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        """Apply a checked operation to the state (state-dependent checks happen here)."""
        raise NotImplementedError

    def finish(self) -> list[tuple[Record, OperationError]]:
        """Complete deferred work (notes); return the records rejected while doing it."""
        return []

    def output(self) -> dict[str, list[dict[str, Any]]]:
        """The output tables as lists of row mappings, in the reference's row order."""
        raise NotImplementedError
