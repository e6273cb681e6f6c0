"""A run's queued requests become one transaction artifact (reference §7.2).

>>> from ledger.typed.config import parse_config
>>> config = parse_config({"knowledge": {"type": "notes"}})
>>> artifact = normalize_appends(config, [
...     {"ledger": "knowledge", "operation": "note", "temp_id": "first", "subject": "README",
...      "note": "Documented", "reason": "Seen", "citations": [{"type": "repository",
...      "path": "README.md"}]},
...     {"ledger": "knowledge", "operation": "vote", "note_id": "#first", "vote": "up"},
... ], "12345:1")
>>> artifact["ledgers"]["knowledge"]["appends"][1]["record"]["note_id"] == final_id("12345:1", 0)
True

The artifact is ``{"version": 1, "transaction_id": T, "ledgers": {name: {"appends":
[{"ledger", "transaction_id", "index", "record"}]}}}``; each ``record`` is the payload to
store plus ``"id": final_id(T, index)``, the index counting across all ledgers of the
batch. :func:`validate_artifact` reads one back as hostile input; :func:`read_artifact`
and :func:`write_artifact` move it through a file the way the reference does (no symlinks,
at most 12 MiB, created exclusively with mode 0600).
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import PersistError, RecordError
from ledger.typed.config import LedgerConfig, LedgerDef
from ledger.typed.jsontext import final_id, js_length
from ledger.typed.limits import RESERVED_FIELDS, check_shape, stringify_bytes
from ledger.typed.reducers.simple import validate_operation
from ledger.typed.refschema import reference_error
from ledger.typed.schema import compile_schema, first_error
from ledger.typed.strictjson import loads_strict

__all__ = [
    "Append",
    "normalize_appends",
    "read_artifact",
    "validate_artifact",
    "write_artifact",
]

MAX_REQUESTS = 100
MAX_ARTIFACT_BYTES = 12 * 1024 * 1024
_TEMP_ID = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_TYPED_KEYS = frozenset(
    {
        "ledger",
        "temp_id",
        "operation",
        "value",
        "key",
        "patch",
        "name",
        "amount",
        "reason",
        "subject",
        "note",
        "citations",
        "note_id",
        "vote",
    }
)
_RAW_KEYS = frozenset({"ledger", "record", "temp_id"})
_INVALID = "Invalid validated ledger transaction artifact"


@dataclass(frozen=True, slots=True, kw_only=True)
class Append:
    """One validated append: ``payload`` is what the record will store.

    For notes the deterministic ``final_id`` is the envelope id and the payload has no
    ``id``; for every other ledger the payload carries ``id == final_id``.
    """

    ledger: str
    index: int
    final_id: str
    payload: dict[str, Any]
    operation: str | None


@dataclass(slots=True, kw_only=True)
class _Draft:
    ledger: LedgerDef
    index: int
    record: dict[str, Any]
    temp_id: str | None


def normalize_appends(
    config: LedgerConfig, requests: Sequence[Any], transaction_id: str
) -> dict[str, Any]:
    """Turn a run's requests into the transaction artifact; raise ``RecordError`` if invalid."""
    _check_transaction_id(transaction_id, RecordError)
    if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
        raise RecordError("Invalid ledger append batch: expected a list of requests")
    if len(requests) > MAX_REQUESTS:
        raise RecordError(f"Invalid ledger append batch: more than {MAX_REQUESTS} requests")
    drafts = [_draft(config, r, i, transaction_id) for i, r in enumerate(requests)]
    temp_ids = _temp_ids(drafts)
    for draft in drafts:
        _rewrite(draft, temp_ids.get(draft.ledger.name, {}))
    _check_batch_sizes(drafts)
    ledgers: dict[str, Any] = {}
    for draft in drafts:
        entry = {
            "ledger": draft.ledger.name,
            "transaction_id": transaction_id,
            "index": draft.index,
            "record": draft.record,
        }
        ledgers.setdefault(draft.ledger.name, {"appends": []})["appends"].append(entry)
    return {
        "version": 1,
        "transaction_id": transaction_id,
        "ledgers": dict(sorted(ledgers.items())),
    }


def _check_transaction_id(transaction_id: object, error: type[Exception]) -> None:
    # JavaScript's length: UTF-16 code units (an emoji counts 2)
    if not isinstance(transaction_id, str) or not 0 < js_length(transaction_id) <= 128:
        raise error(
            "Invalid ledger transaction ID: a non-empty string of at most 128 UTF-16 code "
            "units (characters outside the Basic Multilingual Plane, such as emoji, count 2)"
        )


def _target(config: LedgerConfig, request: Mapping[str, Any]) -> LedgerDef:
    name = request.get("ledger")
    defs = {d.name: d for d in config.ledgers}
    if name is None and len(defs) == 1:
        return next(iter(defs.values()))
    if not isinstance(name, str) or name not in defs:
        raise RecordError(f"Unknown target ledger {name!r} (configured: {sorted(defs)})")
    return defs[name]


def _draft(config: LedgerConfig, request: object, index: int, tx: str) -> _Draft:
    if not isinstance(request, Mapping):
        raise RecordError(f"Invalid ledger append batch: request {index} is not an object")
    check_shape(dict(request))  # bounded first: a deep or cyclic value never reaches deepcopy
    request = copy.deepcopy(dict(request))
    kind = request.pop("type", "ledger_append")  # a safe-output message may name its type
    if kind != "ledger_append":
        raise RecordError(
            f'Invalid ledger append message type: expected "ledger_append", received {kind!r}'
        )
    ledger = _target(config, request)
    payload = _typed_payload(ledger, request) if ledger.type else _raw_payload(ledger, request)
    _check_record_size(ledger, payload)  # before the operation: size is the first refusal
    if ledger.type:
        validate_operation(ledger, payload)
    else:
        check_raw_record(ledger, payload)
    ident = final_id(tx, index)
    record = {**payload, "id": ident}
    _check_record_size(ledger, record)
    return _Draft(ledger=ledger, index=index, record=record, temp_id=_temp_id(request))


def _typed_payload(ledger: LedgerDef, request: dict[str, Any]) -> dict[str, Any]:
    if "record" in request:
        raise RecordError("Built-in ledger requires an operation, not a record")
    if "operation" not in request:
        raise RecordError(f"Built-in ledger {ledger.name!r} requires an operation")
    extra = sorted(set(request) - _TYPED_KEYS)
    if extra:
        raise RecordError(f"Invalid built-in transaction fields: {extra}")
    return {k: v for k, v in request.items() if k not in ("ledger", "temp_id")}


def _raw_payload(ledger: LedgerDef, request: dict[str, Any]) -> dict[str, Any]:
    record = request.get("record")
    if "operation" in request or not isinstance(record, dict):
        raise RecordError(f"Custom ledger {ledger.name!r} requires a record (an object)")
    extra = sorted(set(request) - _RAW_KEYS)
    if extra:
        raise RecordError(f"Invalid ledger transaction fields: {extra}")
    _check_reserved(record, raw=True)
    return record


def check_raw_record(ledger: LedgerDef, record: Mapping[str, Any]) -> None:
    """Check a raw ledger's record (without its ``id``) against the configured schema."""
    if ledger.schema is not None:
        problem = first_error(compile_schema(ledger.schema), record) or reference_error(
            dict(record), ledger.schema
        )  # full Draft 2020-12, and nothing the reference's replay would refuse
        if problem is not None:
            raise RecordError(
                f"Ledger record does not match schema: {problem} (it does not match "
                f"configured schema of ledger {ledger.name!r}; fix the record)"
            )


def _check_reserved(record: Mapping[str, Any], *, raw: bool) -> None:
    for key in sorted(record):
        if key in RESERVED_FIELDS or (raw and key == "id"):
            raise RecordError(f'Ledger record contains reserved field "{key}"')


def _check_record_size(ledger: LedgerDef, record: Mapping[str, Any]) -> None:
    if stringify_bytes(record) > ledger.max_record_kb * 1024:
        raise RecordError(
            f"Ledger record exceeds max-record-kb ({ledger.max_record_kb} KiB) "
            f"for ledger {ledger.name!r}"
        )


def _temp_id(request: Mapping[str, Any]) -> str | None:
    if "temp_id" not in request:
        return None
    value = request["temp_id"]
    if not isinstance(value, str) or not _TEMP_ID.fullmatch(value):
        raise RecordError(f"Invalid or duplicate temporary ID {value!r}")
    return value.removeprefix("#")


def _temp_ids(drafts: list[_Draft]) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for draft in drafts:
        if draft.temp_id is None:
            continue
        seen = table.setdefault(draft.ledger.name, {})
        if draft.temp_id in seen:
            raise RecordError(f"Invalid or duplicate temporary ID {draft.temp_id!r}")
        seen[draft.temp_id] = draft.record["id"]
    return table


def _rewrite(draft: _Draft, temp_ids: Mapping[str, str]) -> None:
    if not temp_ids:
        return
    record = draft.record
    if draft.ledger.type == "notes":
        note_id = record.get("note_id")
        if isinstance(note_id, str) and note_id.startswith("#"):
            record["note_id"] = temp_ids.get(note_id[1:], note_id)
    else:
        draft.record = _replace_refs(record, temp_ids)
    _check_record_size(draft.ledger, draft.record)
    if draft.ledger.type:
        validate_operation(draft.ledger, draft.record)


def _replace_refs(value: Any, temp_ids: Mapping[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("#"):
        return temp_ids.get(value[1:], value)
    if isinstance(value, dict):
        return {k: _replace_refs(v, temp_ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_refs(v, temp_ids) for v in value]
    return value


def _check_batch_sizes(drafts: list[_Draft]) -> None:
    totals: dict[str, int] = {}
    for draft in drafts:
        name = draft.ledger.name
        totals[name] = totals.get(name, 0) + stringify_bytes(draft.record)
        if totals[name] > draft.ledger.max_patch_kb * 1024:
            raise RecordError(
                f"Ledger append batch exceeds max-patch-kb ({draft.ledger.max_patch_kb} KiB) "
                f"for ledger {name!r}"
            )


# --- the artifact as hostile input -------------------------------------------------------


def validate_artifact(config: LedgerConfig, artifact: object) -> list[Append]:
    """Revalidate an artifact as hostile input; the appends in index order, or ``PersistError``.

    ::

        appends = validate_artifact(config, artifact)
        [a.final_id for a in appends]      # [final_id(T, 0), final_id(T, 1), ...]
    """
    try:
        return _validate(config, artifact)
    except RecordError as exc:
        raise PersistError(f"{_INVALID}: {exc}") from None


def _validate(config: LedgerConfig, artifact: object) -> list[Append]:
    if not isinstance(artifact, dict) or set(artifact) != {"version", "transaction_id", "ledgers"}:
        raise PersistError(f"{_INVALID}: expected exactly version, transaction_id and ledgers")
    version, tx, ledgers = artifact["version"], artifact["transaction_id"], artifact["ledgers"]
    if type(version) is not int or version != 1 or not isinstance(ledgers, dict):
        raise PersistError(f"{_INVALID}: unsupported version or ledgers is not an object")
    _check_transaction_id(tx, PersistError)
    defs = {d.name: d for d in config.ledgers}
    appends: list[Append] = []
    for name, entry in ledgers.items():
        if name not in defs:
            raise PersistError(f"{_INVALID}: ledger {name!r} is not configured")
        appends += _validate_ledger(defs[name], entry, tx)
    appends.sort(key=lambda a: a.index)
    if [a.index for a in appends] != list(range(len(appends))):
        raise PersistError("Ledger transaction indices are incomplete")
    return appends


def _validate_ledger(ledger: LedgerDef, entry: object, tx: str) -> list[Append]:
    if not isinstance(entry, dict) or set(entry) != {"appends"}:
        raise PersistError(f"{_INVALID}: ledger {ledger.name!r} must be {{'appends': [...]}}")
    items = entry["appends"]
    if not isinstance(items, list) or not 0 < len(items) <= MAX_REQUESTS:
        raise PersistError(f"{_INVALID}: appends of {ledger.name!r} must be a non-empty list")
    appends = [_validate_append(ledger, item, tx) for item in items]
    total = sum(stringify_bytes(item["record"]) for item in items)
    if total > ledger.max_patch_kb * 1024:
        raise RecordError(f"Ledger append batch exceeds max-patch-kb for {ledger.name!r}")
    return appends


def _validate_append(ledger: LedgerDef, item: object, tx: str) -> Append:
    keys = {"index", "ledger", "record", "transaction_id"}
    if not isinstance(item, dict) or set(item) != keys:
        raise PersistError(f"{_INVALID}: each append has exactly {sorted(keys)}")
    index, record = item["index"], item["record"]
    if item["ledger"] != ledger.name or item["transaction_id"] != tx:
        raise PersistError(f"{_INVALID}: an append's ledger or transaction_id does not match")
    if type(index) is not int or not 0 <= index < MAX_REQUESTS:
        raise PersistError(f"{_INVALID}: index must be an integer 0..99")
    if not isinstance(record, dict) or record.get("id") != final_id(tx, index):
        raise PersistError(f"Invalid deterministic ledger record ID at index {index}")
    check_shape(record)
    _check_reserved(record, raw=False)
    _check_record_size(ledger, record)
    payload, operation = _stored_payload(ledger, record)
    return Append(
        ledger=ledger.name, index=index, final_id=record["id"], payload=payload, operation=operation
    )


def _stored_payload(ledger: LedgerDef, record: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    if ledger.type is None:
        body = {k: v for k, v in record.items() if k != "id"}
        try:
            check_raw_record(ledger, body)
        except RecordError:
            raise RecordError("Ledger record does not match configured schema") from None
        return dict(record), None
    if "record" in record:
        raise RecordError("Built-in ledger requires an operation, not a record")
    operation = validate_operation(ledger, record)
    if ledger.type == "notes":
        return {k: v for k, v in record.items() if k != "id"}, operation
    return dict(record), operation


# --- the artifact as a file ----------------------------------------------------------------


def read_artifact(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an artifact file: a regular file (never a symlink) of at most 12 MiB of JSON."""
    failed = "Failed to read validated ledger transaction artifact"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise PersistError(f"{failed}: {exc.strerror} ({Path(path).name})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ARTIFACT_BYTES:
            raise PersistError(f"{failed}: not a regular file of at most 12 MiB")
        data = handle.read(MAX_ARTIFACT_BYTES + 1)
    try:
        value = loads_strict(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PersistError(f"{failed}: invalid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise PersistError("Invalid ledger transaction artifact: expected a JSON object")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def write_artifact(path: str | os.PathLike[str], artifact: Mapping[str, Any]) -> Path:
    """Create the artifact file exclusively (mode 0600, never through a symlink)."""
    text = json.dumps(artifact, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)
