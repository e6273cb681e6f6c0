"""Records: the gh-aw canonical profile, record hashes, deterministic ids, envelope rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ledger.errors import CanonicalizationError, RecordError
from ledger.typed import Record, canonical_json, final_id, record_sha
from ledger.typed.jsontext import format_timestamp
from ledger.typed.records import InvalidRecordLine

Vectors = Callable[[str], list[dict[str, Any]]]
R1_ID = "ldg-12345678-1234-4123-8123-123456789abc"
NOTE_LINE = (
    '{"id":"ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6","parents":[],"payload":{"citations":'
    '[{"path":"README.md","type":"repository"}],"note":"Documented","operation":"note",'
    '"reason":"Evidence","subject":"README"},"sha":"sha256:9f342b5a04adedf08581feabf3428158'
    'd9678e152447eadc59e1c3a42df9b167","timestamp":"2026-01-01T00:00:00.000Z","type":'
    '"ledger_append","version":1}'
)


def test_canonical_vectors_match_javascript(vectors: Vectors) -> None:
    for case in vectors("canonical.jsonl"):
        value = json.loads(case["input"])
        assert canonical_json(value) == case["ghaw"]


def test_final_id_vectors(vectors: Vectors) -> None:
    for case in vectors("final_id.jsonl"):
        assert final_id(case["transaction_id"], case["index"]) == case["id"]


@pytest.mark.parametrize(
    ("tx", "index", "expected"),
    [
        ("tx", 0, "ldg-56f73ce7-225c-46bb-863e-074a5b1a8744"),
        ("tx", 1, "ldg-a1979ac0-6076-4641-ac21-f7882e00bcf0"),
        ("run-42:1", 0, "ldg-2e55e1e2-4d54-4f1d-8828-d8b99b196ef7"),
        ("12345:1", 0, "ldg-2f986608-3f62-446d-a894-4de896c343a0"),
        ("12345:1", 1, "ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6"),
        ("envelope", 0, "ldg-2faf370e-6301-4f49-b025-43d23e892c3a"),
        ("notes", 0, "ldg-cad095a9-b3e0-44a3-aa3a-171c8a08033e"),
    ],
)
def test_final_id_golden_values(tx: str, index: int, expected: str) -> None:
    assert final_id(tx, index) == expected


def test_js_quirks() -> None:
    assert canonical_json({"b": 1, "10": 1, "2": 1, "a": 1}) == '{"2":1,"10":1,"a":1,"b":1}'
    assert (
        canonical_json([1.0, 1e21, 1e-7, -0.0, 0.1 + 0.2, 1e16])
        == "[1,1e+21,1e-7,0,0.30000000000000004,10000000000000000]"
    )
    assert canonical_json({"\uffff": 1, "\U00010000": 2}) == '{"\U00010000":2,"\uffff":1}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**53, {1: "x"}])
def test_canonical_json_refuses_non_json(bad: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(bad)


def test_notes_record_golden_sha_and_line() -> None:
    rec = Record.new(
        id=final_id("12345:1", 1),
        timestamp="2026-01-01T00:00:00.000Z",
        parents=[],
        payload={
            "operation": "note",
            "subject": "README",
            "note": "Documented",
            "reason": "Evidence",
            "citations": [{"type": "repository", "path": "README.md"}],
        },
    )
    assert rec.sha == "sha256:9f342b5a04adedf08581feabf3428158d9678e152447eadc59e1c3a42df9b167"
    assert rec.to_line() == NOTE_LINE
    assert Record.from_line(NOTE_LINE) == rec
    assert record_sha(rec.as_dict()) == rec.sha


def test_log_chain_golden_shas() -> None:
    r1 = Record.new(
        id=R1_ID,
        timestamp="2026-01-01T00:00:00.000Z",
        parents=[],
        payload={"id": final_id("12345:1", 0), "operation": "append", "value": "x"},
    )
    r2 = Record.new(
        id="ldg-12345678-1234-4123-8123-123456789abd",
        timestamp="2026-01-01T00:00:01.000Z",
        parents=[r1.sha],
        payload={"id": final_id("12345:1", 1), "operation": "append", "value": "y"},
    )
    assert r1.sha == "sha256:2e5eb0af37ca3bb2e9f072029e9e40596f03965a0ac7590dd4a805ed027f5192"
    assert r2.sha == "sha256:c5e06a877852c7bbc38dd797c2a74c1a69bce55e6de4d6aaa31849858c29066b"


def _line(**changes: Any) -> str:
    obj = json.loads(NOTE_LINE)
    obj.update(changes)
    if "sha" not in changes:
        obj["sha"] = record_sha(obj)
    return canonical_json(obj)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("{not json", "invalid-json"),
        (_line(version=2), "unsupported-version"),
        (_line(id="ldg-not-a-uuid"), "invalid-envelope"),
        (_line(type=""), "invalid-envelope"),
        (_line(type="a\nb"), "invalid-envelope"),
        (_line(type="x" * 129), "invalid-envelope"),
        (_line(timestamp="2026-01-01T00:00:00Z"), "invalid-envelope"),
        (_line(timestamp="2026-02-30T00:00:00.000Z"), "invalid-envelope"),
        (_line(parents=["sha256:" + "b" * 64, "sha256:" + "a" * 64]), "invalid-envelope"),
        (_line(parents=["sha256:" + "a" * 64] * 2), "invalid-envelope"),
        (_line(parents=["sha256:" + f"{i:064x}" for i in range(65)]), "invalid-envelope"),
        (_line(parents=["sha1:abc"]), "invalid-envelope"),
        (_line(sha="sha256:" + "0" * 64), "invalid-sha"),
        (_line(extra=1), "invalid-envelope"),
        (NOTE_LINE.replace('"parents":[]', '"parents": []'), "invalid-envelope"),
        ("[1]", "invalid-envelope"),
    ],
)
def test_envelope_rules(line: str, code: str) -> None:
    with pytest.raises(InvalidRecordLine) as info:
        Record.from_line(line)
    assert info.value.code == code
    assert isinstance(info.value, RecordError)


def test_missing_key_is_invalid_envelope() -> None:
    obj = json.loads(NOTE_LINE)
    del obj["type"]
    with pytest.raises(InvalidRecordLine) as info:
        Record.from_line(canonical_json(obj))
    assert info.value.code == "invalid-envelope"


def test_new_sorts_parents_and_refuses_bad_payload() -> None:
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    rec = Record.new(
        id=final_id("t", 0), timestamp=format_timestamp(None), parents=[b, a], payload=1
    )
    assert rec.parents == (a, b)
    with pytest.raises(RecordError):
        Record.new(
            id=final_id("t", 0),
            timestamp="2026-01-01T00:00:00.000Z",
            parents=[],
            payload=float("nan"),
        )


def test_record_is_immutable_and_hashable() -> None:
    rec = Record.from_line(NOTE_LINE)
    with pytest.raises(AttributeError):
        rec.id = "x"  # type: ignore[misc]
    assert {rec, Record.from_line(NOTE_LINE)} == {rec}


def test_payload_json_is_canonical_text() -> None:
    rec = Record.from_line(NOTE_LINE)
    assert rec.payload_json() == canonical_json(rec.payload)


def test_unsafe_magnitude_float_round_trips_like_javascript() -> None:
    rec = Record.new(
        id=final_id("t", 0), timestamp="2026-01-01T00:00:00.000Z", parents=[], payload=2.0**53
    )
    assert '"payload":9007199254740992' in rec.to_line()
    assert Record.from_line(rec.to_line()).sha == rec.sha
