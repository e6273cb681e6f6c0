"""Replay of the six built-in ledger types (and raw ledgers) into output tables.

::

    result = replay(config["findings"], store.read("findings").records)
    result.tables["state"]        # [{"key": "a", "value": '{"id":"a","score":3}'}, ...]
    result.specs                  # the tables' columns and primary keys

Every rule of the reference is enforced, with its wording at the start of the message
(``Table key already exists``, ``Counter exceeds safe integer range``, ...). Values are
validated against the ledger's schema with complete Draft 2020-12.

``replay`` is fail-closed by default: the first invalid operation raises
:class:`OperationError` (a :class:`~ledger.errors.ReplayError`) naming the ledger and the
record. With ``strict=False`` the invalid records are skipped and listed in
``ReplayResult.rejected`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.errors import RecordError, ReplayError
from ledger.typed.config import LedgerDef
from ledger.typed.jsontext import utf8_len
from ledger.typed.order import replay_order
from ledger.typed.records import MAX_SAFE_INTEGER, Record
from ledger.typed.reducers.base import (
    MAX_CELL_BYTES,
    OperationError,
    Reducer,
    TableSpec,
    check_operation,
    js_order,
    safe_integer,
)
from ledger.typed.reducers.notes import NotesReducer
from ledger.typed.refschema import reference_error

__all__ = [
    "Rejection",
    "ReplayResult",
    "make_reducer",
    "replay",
    "validate_operation",
]

_STATE_VALUE = ("value", "text")


def _state(first: tuple[str, str], second: tuple[str, str] = _STATE_VALUE) -> tuple[TableSpec]:
    return (TableSpec(name="state", columns=(first, second), primary_key=(first[0],)),)


class LogReducer(Reducer):
    """Ordered history: ``append(value)``; rows ``(position, value)``."""

    ledger_type = "log"
    specs = _state(("position", "integer"))

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        super().__init__(schema, key)
        self._values: list[str] = []

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        self.check_value(payload["value"])

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        self._values.append(self.check_value(payload["value"]))

    def output(self) -> dict[str, list[dict[str, Any]]]:
        return {"state": [{"position": i, "value": v} for i, v in enumerate(self._values)]}


class SetReducer(Reducer):
    """Unique membership by canonical JSON: ``add``/``remove``; rows ``(identity, value)``."""

    ledger_type = "set"
    specs = _state(("identity", "text"))

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        super().__init__(schema, key)
        self._members: set[str] = set()

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        self.check_value(payload["value"])

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        identity = self.check_value(payload["value"])
        if operation == "add":
            self._members.add(identity)
        else:
            self._members.discard(identity)

    def output(self) -> dict[str, list[dict[str, Any]]]:
        return {"state": [{"identity": m, "value": m} for m in sorted(self._members, key=js_order)]}


def _string_key(value: object) -> str:
    if not isinstance(value, str):
        raise OperationError(f"Ledger key must be a string (got {type(value).__name__})")
    return value


class MapReducer(Reducer):
    """Latest value by string key: ``put``/``delete``; rows ``(key, value)``."""

    ledger_type = "map"
    specs = _state(("key", "text"))

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        super().__init__(schema, key)
        self._entries: dict[str, str] = {}

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        _string_key(payload["key"])
        if operation == "put":
            self.check_value(payload["value"])

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        key = _string_key(payload["key"])
        if operation == "put":
            self._entries[key] = self.check_value(payload["value"])
        else:
            self._entries.pop(key, None)

    def output(self) -> dict[str, list[dict[str, Any]]]:
        keys = sorted(self._entries, key=js_order)
        return {"state": [{"key": k, "value": self._entries[k]} for k in keys]}


class TableReducer(Reducer):
    """Rows keyed by a string primary key: ``insert``/``update``/``upsert``/``delete``."""

    ledger_type = "table"
    specs = _state(("key", "text"))

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        if not key:
            raise OperationError("Table ledger requires a primary key field (config key)")
        super().__init__(schema, key)
        self.primary: str = key
        self._rows: dict[str, tuple[dict[str, Any], str]] = {}

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        if operation in ("insert", "upsert"):
            row = self._row(payload["value"])
            self._sized(row[self.primary], row)
            return
        _string_key(payload["key"])
        if operation == "update":
            self._patch(payload["patch"])

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        if operation in ("insert", "upsert"):
            row = self._row(payload["value"])
            key = row[self.primary]
            if operation == "insert" and key in self._rows:
                raise OperationError(f"Table key already exists: {key!r}")
            self._store(key, row)
        elif operation == "update":
            self._update(_string_key(payload["key"]), payload["patch"])
        else:
            self._rows.pop(_string_key(payload["key"]), None)

    def _row(self, value: object) -> dict[str, Any]:
        if not isinstance(value, dict) or not isinstance(value.get(self.primary), str):
            raise OperationError(f"Table row must contain a string primary key {self.primary!r}")
        return value

    def _patch(self, patch: object) -> dict[str, Any]:
        if not isinstance(patch, dict) or self.primary in patch:
            raise OperationError(
                f"Table patch must be an object without the primary key {self.primary!r}"
            )
        return patch

    def _update(self, key: str, patch: object) -> None:
        checked = self._patch(patch)
        current = self._rows.get(key)
        if current is None:
            raise OperationError(f"Table key does not exist: {key!r}")
        self._store(key, {**current[0], **checked})

    def _sized(self, key: str, row: dict[str, Any]) -> str:
        text = self.check_value(row)
        if len(text) > MAX_CELL_BYTES // 4 and utf8_len(text) > MAX_CELL_BYTES:
            raise OperationError(
                f"Replay cell exceeds size limit: row {key!r} is {utf8_len(text)} bytes "
                f"(at most {MAX_CELL_BYTES})",
            )
        return text

    def _store(self, key: str, row: dict[str, Any]) -> None:
        self._rows[key] = (row, self._sized(key, row))

    def output(self) -> dict[str, list[dict[str, Any]]]:
        keys = sorted(self._rows, key=js_order)
        return {"state": [{"key": k, "value": self._rows[k][1]} for k in keys]}


class CounterReducer(Reducer):
    """Safe-integer counters: ``increment``/``decrement``; rows ``(name, value)``."""

    ledger_type = "counter"
    specs = _state(("name", "text"), ("value", "integer"))

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        super().__init__(None, key)
        self._values: dict[str, int] = {}

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        _counter_args(payload)

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        name, amount = _counter_args(payload)
        current = self._values.get(name, 0)
        result = current + amount if operation == "increment" else current - amount
        if not -MAX_SAFE_INTEGER <= result <= MAX_SAFE_INTEGER:
            raise OperationError(
                f"Counter exceeds safe integer range: {name!r} would become {result}"
            )
        self._values[name] = result

    def output(self) -> dict[str, list[dict[str, Any]]]:
        names = sorted(self._values, key=js_order)
        return {"state": [{"name": n, "value": self._values[n]} for n in names]}


def _counter_args(payload: dict[str, Any]) -> tuple[str, int]:
    name = payload["name"]
    raw = payload["amount"]
    amount = raw if type(raw) is int and 0 <= raw <= MAX_SAFE_INTEGER else None
    if amount is None and type(raw) is float:
        amount = safe_integer(raw)
    if not isinstance(name, str) or not name or amount is None or amount < 0:
        raise OperationError(
            "Counter requires a nonnegative safe integer amount and a name "
            f"(got name {name!r}, amount {raw!r})",
        )
    return name, amount


_REDUCERS: dict[str, type[Reducer]] = {
    "log": LogReducer,
    "set": SetReducer,
    "map": MapReducer,
    "table": TableReducer,
    "counter": CounterReducer,
    "notes": NotesReducer,
}


def make_reducer(
    ledger_type: str,
    *,
    schema: Mapping[str, Any] | None = None,
    key: str | None = None,
    strict_schema: bool = False,
) -> Reducer:
    """A fresh reducer for a built-in type; ``Unknown built-in ledger type`` otherwise.

    >>> reducer = make_reducer("counter")
    >>> type(reducer).__name__, reducer.output()
    ('CounterReducer', {'state': []})
    """
    cls = _REDUCERS.get(ledger_type)
    if cls is None:
        raise OperationError(f"Unknown built-in ledger type {ledger_type!r}")
    reducer = cls(schema, key)
    reducer.strict_schema = strict_schema
    return reducer


def validate_operation(ledger: LedgerDef, payload: object) -> str:
    """Check one operation payload on its own (fields, value rules, schema); return its name.

    Rules that need state (a table key that must or must not exist, counter range,
    a vote's note) are checked when the operation is applied, by :func:`replay`.

    >>> from ledger.typed.config import parse_config
    >>> config = parse_config({"metrics": {"type": "counter"}})
    >>> validate_operation(config["metrics"], {"operation": "increment", "name": "a", "amount": 1})
    'increment'
    """
    if ledger.type is None:
        raise OperationError(
            f"ledger {ledger.name!r} has no type: raw ledgers take records, not operations"
        )
    reducer = make_reducer(ledger.type, schema=ledger.schema, key=ledger.key, strict_schema=True)
    operation = check_operation(ledger.type, payload)
    assert isinstance(payload, dict)
    reducer.check_payload(operation, payload)
    return operation


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """A record that replay skipped (``strict=False``) and why."""

    record: Record
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """The output of :func:`replay`.

    ``tables`` maps each output table to its rows (empty for a raw ledger); ``specs``
    describes the tables; ``record_count`` counts the records replayed (rejections
    excluded); ``rejected`` lists the records skipped when ``strict=False``.
    """

    ledger: str
    type: str | None
    tables: dict[str, list[dict[str, Any]]]
    specs: tuple[TableSpec, ...]
    record_count: int
    rejected: tuple[Rejection, ...] = ()


def _where(ledger: LedgerDef, record: Record) -> str:
    place = f" at {record.shard}:{record.line_no}" if record.shard else ""
    return f"ledger {ledger.name!r} record {record.id or '(no id)'} ({record.sha}){place}"


def replay(
    ledger: LedgerDef, records: Iterable[Record], *, strict: bool = True, ordered: bool = False
) -> ReplayResult:
    """Replay ``records`` of ``ledger`` into its output tables.

    The records are put in canonical replay order first unless ``ordered=True`` says
    they already are (as ``ShardStore.read`` returns them).
    """
    if not isinstance(ledger, LedgerDef):
        raise ReplayError(f"replay needs a LedgerDef (config[name]), not {type(ledger).__name__}")
    try:
        items = list(records) if ordered else replay_order(records)
    except TypeError:
        raise ReplayError("replay needs an iterable of Record objects") from None
    except RecordError as exc:
        raise ReplayError(str(exc)) from None
    if ledger.type is None:
        return _replay_raw(ledger, items, strict)
    reducer = make_reducer(ledger.type, schema=ledger.schema, key=ledger.key)
    rejected: list[Rejection] = []
    for record in items:
        try:
            reducer.apply(record)
        except OperationError as exc:
            _reject(ledger, record, exc, strict, rejected)
    for record, problem in reducer.finish():
        _reject(ledger, record, problem, strict, rejected)
    return ReplayResult(
        ledger=ledger.name,
        type=ledger.type,
        tables=reducer.output(),
        specs=reducer.specs,
        record_count=len(items) - len(rejected),
        rejected=tuple(rejected),
    )


def _reject(
    ledger: LedgerDef, record: Record, exc: OperationError, strict: bool, into: list[Rejection]
) -> None:
    if strict:
        raise OperationError(f"{exc} ({_where(ledger, record)})") from exc
    into.append(Rejection(record=record, error=str(exc)))


def _replay_raw(ledger: LedgerDef, items: list[Record], strict: bool) -> ReplayResult:
    schema = ledger.schema
    rejected: list[Rejection] = []
    if schema is not None:  # checked as the reference checks a branch (refschema)
        for record in items:
            payload = record.payload
            body = (
                {k: v for k, v in payload.items() if k != "id"}
                if isinstance(payload, dict)
                else payload
            )
            problem = reference_error(body, schema)
            if problem is not None:
                exc = OperationError(
                    "Ledger branch contains a record that violates its configured schema: "
                    + problem
                )
                _reject(ledger, record, exc, strict, rejected)
    return ReplayResult(
        ledger=ledger.name,
        type=None,
        tables={},
        specs=(),
        record_count=len(items) - len(rejected),
        rejected=tuple(rejected),
    )
