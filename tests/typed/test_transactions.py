"""Normalization into the transaction artifact and its revalidation (items 33-39, 46)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import PersistError, RecordError
from ledger.typed.config import parse_config
from ledger.typed.jsontext import final_id
from ledger.typed.transactions import (
    normalize_appends,
    read_artifact,
    validate_artifact,
    write_artifact,
)

CITATION = {"type": "repository", "path": "README.md"}
NOTE = {"operation": "note", "subject": "S", "note": "N", "reason": "R", "citations": [CITATION]}


def test_first_record_id_is_final_id_of_index_0() -> None:
    config = parse_config({"history": {"type": "log"}})
    artifact = normalize_appends(config, [{"operation": "append", "value": "x"}], "tx")
    append = artifact["ledgers"]["history"]["appends"][0]
    assert append["record"]["id"] == final_id("tx", 0) == "ldg-56f73ce7-225c-46bb-863e-074a5b1a8744"
    assert append == {
        "ledger": "history",
        "transaction_id": "tx",
        "index": 0,
        "record": {"operation": "append", "value": "x", "id": final_id("tx", 0)},
    }
    assert set(artifact) == {"version", "transaction_id", "ledgers"}


def test_unknown_operation_and_record_to_typed_ledger() -> None:
    config = parse_config({"history": {"type": "log"}})
    with pytest.raises(RecordError, match="Unsupported ledger operation"):
        normalize_appends(config, [{"operation": "claim", "value": 1}], "tx")
    with pytest.raises(RecordError, match="requires an operation"):
        normalize_appends(config, [{"record": {"a": 1}}], "tx")


def test_raw_normalization_is_deterministic() -> None:
    config = parse_config({"audit": {}})
    requests = [{"record": {"n": i}} for i in range(3)]
    first = normalize_appends(config, requests, "run-42:1")
    assert first == normalize_appends(config, requests, "run-42:1")
    ids = [a["record"]["id"] for a in first["ledgers"]["audit"]["appends"]]
    assert len(set(ids)) == 3
    assert requests == [{"record": {"n": i}} for i in range(3)]  # inputs untouched


def test_notes_temp_id_rewrites_vote_and_validates() -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    requests = [
        {**NOTE, "temp_id": "first"},
        {"operation": "vote", "note_id": "#first", "vote": "up"},
        {"operation": "vote", "note_id": "#first", "vote": "down", "reason": "stale"},
    ]
    artifact = normalize_appends(config, requests, "tx")
    votes = artifact["ledgers"]["knowledge"]["appends"][1:]
    assert [v["record"]["note_id"] for v in votes] == [final_id("tx", 0)] * 2
    assert [a.index for a in validate_artifact(config, artifact)] == [0, 1, 2]


def test_forward_references_and_non_notes_rewriting() -> None:
    config = parse_config({"history": {"type": "log"}, "other": {"type": "log"}})
    requests = [
        {"ledger": "history", "operation": "append", "value": {"see": ["#later", "#nope"]}},
        {"ledger": "history", "operation": "append", "value": "y", "temp_id": "later"},
        {"ledger": "other", "operation": "append", "value": "#later"},
    ]
    artifact = normalize_appends(config, requests, "tx")
    first = artifact["ledgers"]["history"]["appends"][0]["record"]
    assert first["value"] == {"see": [final_id("tx", 1), "#nope"]}
    # temp ids are scoped to their ledger
    assert artifact["ledgers"]["other"]["appends"][0]["record"]["value"] == "#later"


@pytest.mark.parametrize(
    ("config_source", "request_", "message"),
    [
        (
            {"audit": {"schema": {"type": "object", "required": ["a"]}}},
            {"record": {"b": 1}},
            "does not match schema",
        ),
        ({"audit": {}}, {"record": {"parents": []}}, "reserved field"),
        ({"audit": {}}, {"record": {"id": "x"}}, "reserved field"),
        ({"audit": {}}, {"operation": "append", "value": 1}, "requires a record"),
        (
            {"knowledge": {"type": "notes"}},
            {**NOTE, "subject": "s" * 32 * 1024},
            "max-record-kb",
        ),
        (
            {"history": {"type": "log"}},
            {"operation": "append", "value": 1, "ledger": "nope"},
            "Unknown target ledger",
        ),
        (
            {"history": {"type": "log"}},
            {"operation": "append", "value": 1, "temp_id": "a b"},
            "temporary ID",
        ),
        (
            {"history": {"type": "log"}},
            {"operation": "append", "value": 1, "extra": 1},
            "Invalid built-in transaction fields",
        ),
        (
            {"metrics": {"type": "counter"}},
            {"operation": "increment", "name": "a", "amount": "2"},
            "safe integer",
        ),
        (
            {"t": {"type": "table", "key": "id"}},
            {"operation": "insert", "value": {"id": 1}},
            "primary key",
        ),
    ],
)
def test_bad_requests_are_refused(
    config_source: dict[str, Any], request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(RecordError, match=message):
        normalize_appends(parse_config(config_source), [request_], "tx")


def test_omitted_ledger_needs_exactly_one_ledger() -> None:
    config = parse_config({"a": {"type": "log"}, "b": {"type": "log"}})
    with pytest.raises(RecordError, match="Unknown target ledger"):
        normalize_appends(config, [{"operation": "append", "value": 1}], "tx")


def test_batch_limits() -> None:
    config = parse_config({"history": {"type": "log", "max-patch-kb": 1}})
    with pytest.raises(RecordError, match="Invalid ledger append batch"):
        normalize_appends(config, [{"operation": "append", "value": 1}] * 101, "tx")
    with pytest.raises(RecordError, match="max-patch-kb"):
        normalize_appends(config, [{"operation": "append", "value": "x" * 300}] * 4, "tx")
    with pytest.raises(RecordError, match="transaction ID"):
        normalize_appends(config, [], "")
    with pytest.raises(RecordError, match="transaction ID"):
        normalize_appends(config, [], "t" * 129)


def test_shape_limits() -> None:
    config = parse_config({"audit": {}})
    with pytest.raises(RecordError, match="128 keys"):
        normalize_appends(config, [{"record": {str(i): i for i in range(129)}}], "tx")
    with pytest.raises(RecordError, match="256 bytes"):
        normalize_appends(config, [{"record": {"k" * 257: 1}}], "tx")


# --- the artifact as hostile input -------------------------------------------------------


@pytest.fixture
def artifact() -> dict[str, Any]:
    config = parse_config({"history": {"type": "log"}})
    requests = [{"operation": "append", "value": v} for v in ("x", "y")]
    return normalize_appends(config, requests, "tx")


def mutate(artifact: dict[str, Any], how: str) -> Any:
    bad = copy.deepcopy(artifact)
    appends = bad["ledgers"]["history"]["appends"]
    match how:
        case "version":
            bad["version"] = 2
        case "list":
            bad["ledgers"] = []
        case "extra":
            bad["extra"] = 1
        case "unknown-ledger":
            bad["ledgers"]["nope"] = bad["ledgers"].pop("history")
        case "gap":
            appends[1]["index"] = 2
            appends[1]["record"]["id"] = final_id("tx", 2)
        case "id":
            appends[0]["record"]["id"] = final_id("tx", 7)
        case "reserved":
            appends[0]["record"]["sha"] = "x"
        case "operation":
            appends[0]["record"]["operation"] = "drop"
        case "tx":
            appends[0]["transaction_id"] = "other"
        case "not-object":
            return ["x"]
    return bad


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("version", "Invalid validated ledger transaction artifact"),
        ("list", "Invalid validated ledger transaction artifact"),
        ("extra", "Invalid validated ledger transaction artifact"),
        ("not-object", "Invalid validated ledger transaction artifact"),
        ("unknown-ledger", "not configured"),
        ("gap", "indices are incomplete"),
        ("id", "Invalid deterministic ledger record ID"),
        ("reserved", "reserved field"),
        ("operation", "Unsupported ledger operation"),
        ("tx", "does not match"),
    ],
)
def test_artifact_is_revalidated(artifact: dict[str, Any], how: str, message: str) -> None:
    config = parse_config({"history": {"type": "log"}})
    with pytest.raises(PersistError, match=message):
        validate_artifact(config, mutate(artifact, how))


def test_artifact_file_round_trip(tmp_path: Path, artifact: dict[str, Any]) -> None:
    path = write_artifact(tmp_path / "ledger-transactions.json", artifact)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_artifact(path) == artifact
    with pytest.raises(FileExistsError):
        write_artifact(path, artifact)


def test_read_artifact_refuses_malformed_and_symlinks(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PersistError, match="Failed to read"):
        read_artifact(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"version": 1}))
    link = tmp_path / "link.json"
    os.symlink(good, link)
    with pytest.raises(PersistError, match="Failed to read"):
        read_artifact(link)
    with pytest.raises(PersistError, match="Failed to read"):
        read_artifact(tmp_path / "missing.json")
    nan = tmp_path / "nan.json"
    nan.write_text('{"version": NaN}')
    with pytest.raises(PersistError, match="Failed to read"):
        read_artifact(nan)


def test_message_type_is_optional_but_checked() -> None:
    config = parse_config({"history": {"type": "log"}})
    message = {"type": "ledger_append", "operation": "append", "value": 1}
    artifact = normalize_appends(config, [message], "tx")
    assert "type" not in artifact["ledgers"]["history"]["appends"][0]["record"]
    with pytest.raises(RecordError, match="message type"):
        normalize_appends(config, [{**message, "type": "ledger_delete"}], "tx")
