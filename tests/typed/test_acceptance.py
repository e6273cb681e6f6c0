"""A new user's walk through the typed-ledger API, exactly as DESIGN.md documents it.

Every name comes from the one documented import line and is called with the documented
signature (positional where DESIGN.md writes it positionally). Expected values come from
the behaviour spec (``spec/gh-aw-ledger-behavior.md``): its golden vectors (§8), its
envelope rules (§3.2), its projection schema (§6) and the seed document's examples.
Hostile-input checks live in ``test_acceptance_hostile.py``.
"""

from __future__ import annotations

import sqlite3
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger import Ref, RefState, verify_refs
from ledger.errors import LedgerError
from ledger.typed import (
    ConfigError,
    Diagnostic,
    IntentQueue,
    LedgerConfig,
    LedgerDef,
    LedgerResolver,
    PersistError,
    QueryError,
    Record,
    RecordError,
    ReplayError,
    ShardStore,
    apply_compaction,
    build_projection,
    canonical_json,
    final_id,
    normalize_appends,
    parse_config,
    persist,
    plan_compaction,
    query_records,
    query_sql,
    record_sha,
    replay,
    replay_order,
    tool_definitions,
)

TS = "2026-01-01T00:00:00.000Z"
SEED_YAML = """
history:
  type: log
  schema: { type: string }
processed:
  type: set
repositories:
  type: map
  schema: { type: object }
findings:
  type: table
  key: id
  schema:
    type: object
    required: [id, severity]
    properties:
      id: { type: string }
      severity: { type: string }
metrics:
  type: counter
knowledge:
  type: notes
audit: {}
"""
# The spec's golden records (§8), as the reference writes them: one canonical line each.
NOTE_LINE = (
    '{"id":"ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6","parents":[],"payload":{"citations":'
    '[{"path":"README.md","type":"repository"}],"note":"Documented","operation":"note",'
    '"reason":"Evidence","subject":"README"},"sha":"sha256:9f342b5a04adedf08581feabf34281'
    '58d9678e152447eadc59e1c3a42df9b167","timestamp":"2026-01-01T00:00:00.000Z","type":'
    '"ledger_append","version":1}'
)
R1_SHA = "sha256:2e5eb0af37ca3bb2e9f072029e9e40596f03965a0ac7590dd4a805ed027f5192"
R2_SHA = "sha256:c5e06a877852c7bbc38dd797c2a74c1a69bce55e6de4d6aaa31849858c29066b"
R1_LINE = (
    '{"id":"ldg-12345678-1234-4123-8123-123456789abc","parents":[],"payload":{"id":'
    '"ldg-2f986608-3f62-446d-a894-4de896c343a0","operation":"append","value":"x"},'
    f'"sha":"{R1_SHA}","timestamp":"2026-01-01T00:00:00.000Z","type":"ledger_append",'
    '"version":1}'
)
R2_LINE = (
    '{"id":"ldg-12345678-1234-4123-8123-123456789abd","parents":["' + R1_SHA + '"],'
    '"payload":{"id":"ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6","operation":"append",'
    f'"value":"y"}},"sha":"{R2_SHA}","timestamp":"2026-01-01T00:00:01.000Z",'
    '"type":"ledger_append","version":1}'
)
NOTE = {
    "operation": "note",
    "subject": "README",
    "note": "Documented",
    "reason": "Evidence",
    "citations": [{"type": "repository", "path": "README.md"}],
}


def shard_dir(root: Path, name: str) -> Path:
    return root / "ledgers" / name / "ledger" / "shards"


def write_shard(root: Path, name: str, lines: list[str], shard: str | None = None) -> str:
    """A reference-format shard: ``<uuid4>.jsonl``, one canonical line + ``\\n`` each."""
    directory = shard_dir(root, name)
    directory.mkdir(parents=True, exist_ok=True)
    file_name = shard or f"{uuid.uuid4()}.jsonl"
    (directory / file_name).write_bytes("".join(line + "\n" for line in lines).encode())
    return file_name


def rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# --- configuration ----------------------------------------------------------------------


def test_parse_config_yaml_text_and_lookup() -> None:
    config = parse_config(SEED_YAML)
    assert isinstance(config, LedgerConfig)
    assert [d.name for d in config.ledgers] == [
        "audit",
        "findings",
        "history",
        "knowledge",
        "metrics",
        "processed",
        "repositories",
    ]
    findings = config["findings"]
    assert isinstance(findings, LedgerDef)
    assert (findings.name, findings.type, findings.key) == ("findings", "table", "id")
    assert findings.schema is not None and findings.schema["required"] == ["id", "severity"]
    assert (findings.max_record_kb, findings.max_segment_kb, findings.max_patch_kb) == (32, 100, 10)
    assert findings.compaction.enabled
    assert config["audit"].type is None  # raw
    with pytest.raises(ConfigError, match="no ledger named"):
        config["missing"]


def test_parse_config_single_form_and_mapping() -> None:
    single = parse_config("schema: {type: string}\nmax-record-kb: 8\ntype: log\n")
    assert [(d.name, d.type, d.max_record_kb) for d in single.ledgers] == [("default", "log", 8)]
    assert parse_config({}).ledgers[0].name == "default"
    assert parse_config("").ledgers[0].name == "default"
    assert [d.name for d in parse_config({"type": {}, "key": {}}).ledgers] == ["key", "type"]
    assert [d.name for d in parse_config({"replay": {}}).ledgers] == ["replay"]


@pytest.mark.parametrize(
    ("source", "wording"),
    [
        ([1], "tools.ledger must be an object"),
        ({"a b": {}}, "must contain only letters, numbers, hyphens, and underscores"),
        ({"x": 3}, "tools.ledger.x must be an object"),
        ({"x": {"type": "claims"}}, "Unknown built-in ledger type"),
        ({"x": {"type": "log", "key": "id"}}, "key is required only for type: table"),
        ({"x": {"type": "table", "key": "1d"}}, "must be a valid primary key field"),
        ({"x": {"type": "counter", "schema": {}}}, "counter does not accept a value schema"),
        ({"x": {"type": "notes", "schema": {}}}, "notes does not accept a value schema"),
        ({"x": {"max-record-kb": 33}}, "max-record-kb cannot exceed 32"),
        ({"x": {"max-record-kb": 0}}, "must be a positive integer"),
        ({"x": {"max-record-kb": 16, "max-segment-kb": 8}}, "cannot exceed max-segment-kb"),
        ({"x": {"max-patch-kb": 10241}}, "must be a positive integer"),
        ({"x": {"color": 1}}, 'has unsupported property "color"'),
        ({"x": {"compaction": {"every": 1}}}, 'compaction has unsupported property "every"'),
        ({"x": {"type": "log", "replay": None}}, "Custom ledger replay is no longer supported"),
        ({"x": {"replay": {"script": "x"}}}, "Custom ledger replay is no longer supported"),
        ({"x": {"schema": "../schema.json"}}, "repository-relative path"),
        ({"x": {"schema": "${{ x }}.json"}}, "repository-relative path"),
        ({"x": {"schema": {"properties": {"${{ a }}": {}}}}}, "expressions"),
        ({"x": {"schema": {"oneOf": True}}}, "invalid JSON Schema"),
        ({"x": {"schema": {"type": "object", "description": "a" * 2_000_000}}}, "maximum size"),
        ({"max-record-kb": "abc"}, "tools.ledger.max-record-kb must be a positive integer"),
    ],
)
def test_parse_config_refusals_use_the_reference_wording(source: Any, wording: str) -> None:
    with pytest.raises(ConfigError, match=wording.replace("$", r"\$").replace("(", r"\(")):
        parse_config(source)


def test_serialized_config_limit_is_98304_base64_chars() -> None:
    big = {"type": "object", "description": "d" * 37_000}
    parse_config({"a": {"type": "log", "schema": big}})  # ~49 KiB of base64: fine
    with pytest.raises(ConfigError, match="exceeds the 98304-byte environment limit"):
        parse_config({"a": {"type": "log", "schema": big}, "b": {"type": "log", "schema": big}})


def test_schema_path_resolves_inside_the_repository(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "row.json").write_text('{"type": "object"}')
    (tmp_path / "outside.json").write_text("{}")
    config = parse_config({"x": {"type": "map", "schema": "schemas/row.json"}}, base_dir=tmp_path)
    assert config["x"].schema == {"type": "object"}
    (tmp_path / "schemas" / "link.json").symlink_to("/etc/hostname")
    with pytest.raises(ConfigError, match="must resolve inside the repository"):
        parse_config({"x": {"schema": "schemas/link.json"}}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match="cannot resolve"):
        parse_config({"x": {"schema": "schemas/nope.json"}}, base_dir=tmp_path)


# --- records ------------------------------------------------------------------------------


def test_golden_ids_hashes_and_lines() -> None:
    assert final_id("tx", 0) == "ldg-56f73ce7-225c-46bb-863e-074a5b1a8744"
    assert final_id("12345:1", 1) == "ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6"
    assert final_id("run-42:1", 0) == "ldg-2e55e1e2-4d54-4f1d-8828-d8b99b196ef7"
    assert canonical_json({"b": 1, "10": 1, "2": 1, "a": 1}) == '{"2":1,"10":1,"a":1,"b":1}'
    assert (
        canonical_json([1.0, 1e21, 1e-7, -0.0, 0.1 + 0.2, 1e16])
        == "[1,1e+21,1e-7,0,0.30000000000000004,10000000000000000]"
    )
    body = {
        "version": 1,
        "id": final_id("12345:1", 1),
        "type": "ledger_append",
        "timestamp": TS,
        "parents": [],
        "payload": NOTE,
    }
    sha = record_sha(body)
    assert sha == "sha256:9f342b5a04adedf08581feabf3428158d9678e152447eadc59e1c3a42df9b167"
    assert record_sha({**body, "sha": "ignored"}) == sha
    # Positional, in the documented order; parents may be a list.
    record = Record(1, body["id"], "ledger_append", TS, [], NOTE, sha)
    assert record.to_line() == NOTE_LINE
    parsed = Record.from_line(NOTE_LINE)
    assert parsed == record and parsed.parents == ()
    assert parsed.to_line() == NOTE_LINE
    assert record_sha(parsed) == sha
    assert Record.from_line(NOTE_LINE.encode()).sha == sha
    assert Record.from_line(R1_LINE).sha == R1_SHA and Record.from_line(R2_LINE).sha == R2_SHA


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"version": 2}, "unsupported-version"),
        ({"id": "ldg-not-a-uuid"}, "invalid-envelope"),
        ({"type": ""}, "invalid-envelope"),
        ({"type": "a\nb"}, "invalid-envelope"),
        ({"type": "t" * 129}, "invalid-envelope"),
        ({"type": "\U0001f600" * 65}, "invalid-envelope"),  # 130 UTF-16 units in JS
        ({"timestamp": "2026-01-01T00:00:00Z"}, "invalid-envelope"),
        ({"timestamp": "2026-02-30T00:00:00.000Z"}, "invalid-envelope"),
        ({"parents": ["sha256:" + "b" * 64, "sha256:" + "a" * 64]}, "invalid-envelope"),
        ({"parents": ["sha256:" + "a" * 64] * 2}, "invalid-envelope"),
        ({"parents": [f"sha256:{i:064x}" for i in range(65)]}, "invalid-envelope"),
        ({"extra": 1}, "invalid-envelope"),
    ],
)
def test_every_envelope_rule(change: dict[str, Any], code: str) -> None:
    body = {
        "version": 1,
        "id": final_id("tx", 0),
        "type": "ledger_append",
        "timestamp": TS,
        "parents": [],
        "payload": {"a": 1},
        **change,
    }
    line = canonical_json({**body, "sha": record_sha(body)})
    with pytest.raises(RecordError) as info:
        Record.from_line(line)
    assert getattr(info.value, "code", None) == code


def test_non_canonical_and_bad_sha_lines() -> None:
    with pytest.raises(RecordError) as info:
        Record.from_line(NOTE_LINE.replace('"parents":[]', '"parents": []'))
    assert info.value.code == "invalid-envelope"  # type: ignore[attr-defined]
    with pytest.raises(RecordError) as info:
        Record.from_line(NOTE_LINE.replace("Documented", "Undocumented"))
    assert info.value.code == "invalid-sha"  # type: ignore[attr-defined]
    with pytest.raises(RecordError) as info:
        Record.from_line(NOTE_LINE[:-1])
    assert info.value.code == "invalid-json"  # type: ignore[attr-defined]


# --- the store ----------------------------------------------------------------------------


def test_append_and_read_like_the_reference(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    payloads = [NOTE, {**NOTE, "subject": "LICENSE"}]
    written = store.append("notes", payloads, timestamp=TS)
    assert [r.payload for r in written] == payloads
    assert written[0].parents == () and written[1].parents == (written[0].sha,)
    files = list(shard_dir(tmp_path, "notes").iterdir())
    assert len(files) == 1 and files[0].name == written[0].shard
    assert uuid.UUID(files[0].stem).version == 4
    assert files[0].read_text() == "".join(r.to_line() + "\n" for r in written)
    assert written[1].offset == len(written[0].to_line().encode()) + 1
    more = store.append("notes", [{**NOTE, "subject": "NEWS"}])
    assert more[0].parents == (written[1].sha,)
    reconstruction = store.read("notes")
    assert reconstruction.diagnostics == ()
    assert [r.sha for r in reconstruction.records] == [r.sha for r in [*written, *more]]
    assert reconstruction.heads == (more[0].sha,)
    assert {r.shard for r in reconstruction.records} == {written[0].shard, more[0].shard}
    assert store.read("never-written").records == ()


def test_reading_reports_every_diagnostic(tmp_path: Path) -> None:
    r1, r2 = Record.from_line(R1_LINE), Record.from_line(R2_LINE)
    good = f"{uuid.uuid4()}.jsonl"
    write_shard(tmp_path, "log", [R2_LINE], good)  # R1 is absent: missing parent
    bad_version = R1_LINE.replace('"version":1', '"version":2')
    conflict_body = {**r1.as_dict(), "payload": {"other": True}}
    del conflict_body["sha"]
    conflict = canonical_json({**conflict_body, "sha": record_sha(conflict_body)})
    directory = shard_dir(tmp_path, "log")
    other = f"{uuid.uuid4()}.jsonl"
    (directory / other).write_bytes(
        (
            "{oops\n"
            + bad_version
            + "\n"
            + R2_LINE.replace('"id":"ldg-12345678', '"id":"ldg-zz')
            + "\n"
            + R2_LINE.replace('"value":"y"', '"value":"z"')
            + "\n"
            + R2_LINE
            + "\n"  # same sha as in the first shard: silently deduplicated
            + conflict
            + "\n"
            + R1_LINE  # no newline: truncated, ignored
        ).encode()
    )
    (directory / "not-a-uuid.jsonl").write_text(R1_LINE + "\n")
    reconstruction = ShardStore(tmp_path).read("log")
    found = {(d.code, d.file, d.line) for d in reconstruction.diagnostics}
    assert {
        ("invalid-json", other, 1),
        ("unsupported-version", other, 2),
        ("invalid-envelope", other, 3),
        ("invalid-sha", other, 4),
        ("truncated-record", other, 7),
        ("invalid-envelope", "not-a-uuid.jsonl", None),
    } <= found
    # R2 is in both shards; it is reported where it was read first (files sorted by name)
    missing = [(d.file, d.line) for d in reconstruction.diagnostics if d.code == "missing-parent"]
    assert missing == [min((good, 1), (other, 5))]
    assert all(isinstance(d, Diagnostic) and d.detail for d in reconstruction.diagnostics)
    shas = [r.sha for r in reconstruction.records]
    assert shas.count(r2.sha) == 1 and r1.sha not in shas
    # conflict shares R1's id with a different sha; R1 is absent, so no conflict yet
    write_shard(tmp_path, "log", [R1_LINE])
    codes = [d.code for d in ShardStore(tmp_path).read("log").diagnostics]
    assert "duplicate-id-conflict" in codes and "missing-parent" not in codes


def test_duplicate_line_in_one_shard(tmp_path: Path) -> None:
    write_shard(tmp_path, "log", [R1_LINE, R1_LINE])
    reconstruction = ShardStore(tmp_path).read("log")
    # faithful on read (issue 16 item 7): deduplicated as the reference does, kept as a warning
    assert reconstruction.diagnostics == ()
    assert [d.code for d in reconstruction.warnings] == ["duplicate-id"]
    assert len(reconstruction.records) == 1


def test_replay_order_is_waves_with_sha_order() -> None:
    def fake(sha_digit: str, parents: tuple[str, ...] = ()) -> Record:
        sha = "sha256:" + sha_digit * 64
        return Record(1, final_id("t", int(sha_digit, 16)), "ledger_append", TS, parents, 0, sha)

    a, b = fake("1"), fake("9")
    c = fake("0", (a.sha,))
    assert [r.sha[-1] for r in replay_order([c, b, a])] == ["1", "9", "0"]
    x = fake("2", ("sha256:" + "3" * 64,))
    y = fake("3", (x.sha,))
    assert replay_order([x, y, a]) == [a]  # a cycle never becomes ready


# --- replay -------------------------------------------------------------------------------


def ops(ledger: LedgerDef, payloads: list[Any]) -> list[Record]:
    out: list[Record] = []
    parents: tuple[str, ...] = ()
    for i, payload in enumerate(payloads):
        record = Record.new(
            id=final_id(ledger.name, i), timestamp=TS, parents=parents, payload=payload
        )
        out.append(record)
        parents = (record.sha,)
    return out


def test_replay_each_type_as_the_spec_examples() -> None:
    config = parse_config(SEED_YAML)

    def state(name: str, payloads: list[Any]) -> list[dict[str, Any]]:
        return replay(config[name], ops(config[name], payloads)).tables["state"]

    assert state("history", [{"operation": "append", "value": v} for v in "xxy"]) == [
        {"position": 0, "value": '"x"'},
        {"position": 1, "value": '"x"'},
        {"position": 2, "value": '"y"'},
    ]
    assert state(
        "processed",
        [
            {"operation": "add", "value": {"a": 1, "b": [True, None]}},
            {"operation": "remove", "value": {"b": [True, None], "a": 1}},
            {"operation": "add", "value": [False, 0, "0"]},
        ],
    ) == [{"identity": '[false,0,"0"]', "value": '[false,0,"0"]'}]
    assert state(
        "repositories",
        [
            {"operation": "put", "key": "a", "value": {"n": 1}},
            {"operation": "put", "key": "a", "value": {"n": 2}},
            {"operation": "delete", "key": "missing"},
        ],
    ) == [{"key": "a", "value": '{"n":2}'}]
    assert state(
        "findings",
        [
            {"operation": "insert", "value": {"id": "a", "severity": "x"}},
            {"operation": "update", "key": "a", "patch": {"severity": "y"}},
            {"operation": "upsert", "value": {"id": "b", "severity": "x"}},
        ],
    ) == [
        {"key": "a", "value": '{"id":"a","severity":"y"}'},
        {"key": "b", "value": '{"id":"b","severity":"x"}'},
    ]
    assert state(
        "metrics",
        [
            {"operation": "decrement", "name": "a", "amount": 1},
            {"operation": "increment", "name": "a", "amount": 1},
            {"operation": "increment", "name": "b", "amount": 1},
        ],
    ) == [{"name": "a", "value": 0}, {"name": "b", "value": 1}]


@pytest.mark.parametrize(
    ("name", "payloads", "wording"),
    [
        ("history", [{"operation": "append", "value": 1}], "does not match schema"),
        ("history", [{"operation": "push", "value": "x"}], "Unsupported ledger operation"),
        ("history", [{"operation": "append", "value": "x", "at": 1}], "Invalid ledger operation"),
        ("findings", [{"operation": "update", "key": "a", "patch": {}}], "does not exist"),
        (
            "findings",
            [{"operation": "insert", "value": {"id": "a", "severity": "x"}}] * 2,
            "already exists",
        ),
        ("findings", [{"operation": "insert", "value": {"severity": "x"}}], "string primary key"),
        ("metrics", [{"operation": "increment", "name": "a", "amount": "2"}], "safe integer"),
        (
            "metrics",
            [
                {"operation": "increment", "name": "a", "amount": 2**53 - 1},
                {"operation": "increment", "name": "a", "amount": 1},
            ],
            "safe integer range",
        ),
        ("knowledge", [{"operation": "vote", "note_id": "ldg-x", "vote": "up"}], "missing note"),
        ("knowledge", [{**NOTE, "id": "x"}], "must not duplicate"),
        (
            "knowledge",
            [{**NOTE, "citations": [{"type": "repository", "path": "../x"}]}],
            "valid citation",
        ),
    ],
)
def test_replay_refusals_name_the_record(name: str, payloads: list[Any], wording: str) -> None:
    ledger = parse_config(SEED_YAML)[name]
    records = ops(ledger, payloads)
    with pytest.raises(ReplayError, match=wording) as info:
        replay(ledger, records)
    assert f"ledger {name!r}" in str(info.value)


# --- projections --------------------------------------------------------------------------

GENERIC = {
    "shards": [("file", "TEXT", 0, 1), ("size", "INTEGER", 1, 0)],
    "records": [
        ("ordinal", "INTEGER", 0, 1),
        ("id", "TEXT", 1, 0),
        ("sha", "TEXT", 1, 0),
        ("type", "TEXT", 1, 0),
        ("timestamp", "TEXT", 1, 0),
        ("payload", "TEXT", 1, 0),
        ("shard", "TEXT", 1, 0),
        ("offset", "INTEGER", 1, 0),
    ],
    "parents": [("child_sha", "TEXT", 1, 1), ("parent_sha", "TEXT", 1, 2)],
    "diagnostics": [
        ("ordinal", "INTEGER", 0, 1),
        ("code", "TEXT", 1, 0),
        ("file", "TEXT", 0, 0),
        ("line", "INTEGER", 0, 0),
        ("id", "TEXT", 0, 0),
        ("detail", "TEXT", 0, 0),
    ],
}
METADATA = [
    ("ledger_name", "TEXT", 1, 0),
    ("projection_version", "INTEGER", 1, 0),
    ("record_count", "INTEGER", 1, 0),
    ("script_sha256", "TEXT", 1, 0),
    ("output_version", "INTEGER", 1, 0),
    ("table_name", "TEXT", 1, 0),
    ("columns_json", "TEXT", 1, 0),
]
INDEXES = {
    "records_by_id": ("records", ["id"]),
    "records_by_type_time": ("records", ["type", "timestamp"]),
    "records_by_shard_offset": ("records", ["shard", "offset"]),
    "parents_by_parent": ("parents", ["parent_sha"]),
    "diagnostics_by_code": ("diagnostics", ["code"]),
}
STATE = {
    "history": [("position", "INTEGER", 1, 1), ("value", "TEXT", 0, 0)],
    "processed": [("identity", "TEXT", 1, 1), ("value", "TEXT", 0, 0)],
    "repositories": [("key", "TEXT", 1, 1), ("value", "TEXT", 0, 0)],
    "findings": [("key", "TEXT", 1, 1), ("value", "TEXT", 0, 0)],
    "metrics": [("name", "TEXT", 1, 1), ("value", "INTEGER", 0, 0)],
}
NOTES_TABLES = {
    "notes": [
        ("id", "TEXT", 1, 1),
        ("subject", "TEXT", 0, 0),
        ("note", "TEXT", 0, 0),
        ("reason", "TEXT", 0, 0),
        ("created_at", "TEXT", 0, 0),
        ("record_sha", "TEXT", 0, 0),
    ],
    "note_citations": [
        ("note_id", "TEXT", 1, 1),
        ("ordinal", "INTEGER", 1, 2),
        ("citation_type", "TEXT", 0, 0),
        ("path", "TEXT", 0, 0),
        ("start_line", "INTEGER", 0, 0),
        ("end_line", "INTEGER", 0, 0),
    ],
    "note_votes": [
        ("record_id", "TEXT", 1, 1),
        ("note_id", "TEXT", 0, 0),
        ("vote", "TEXT", 0, 0),
        ("reason", "TEXT", 0, 0),
        ("created_at", "TEXT", 0, 0),
    ],
    "note_state": [
        ("note_id", "TEXT", 1, 1),
        ("upvotes", "INTEGER", 0, 0),
        ("downvotes", "INTEGER", 0, 0),
        ("net_votes", "INTEGER", 0, 0),
        ("last_vote_at", "TEXT", 0, 0),
        ("last_positive_vote_at", "TEXT", 0, 0),
    ],
}
SCRIPT_SHA = {
    "history": "02661d610cea198539dca57f9ac08c5795d6207cfd2ab72fd61ca273998b63f4",
    "knowledge": "1ffac336051c8bb1f5150839c2d26c6c3c1ddac916e80d0104727e5a523d5983",
    "findings": "796badefbf5623e66d37ae1be2b18c3be2ec6bb55a6452e6544ac8f07f8a6988",
}


def table_info(path: Path, table: str) -> list[tuple[str, str, int, int]]:
    """``(name, type, notnull, pk)`` per column, from a plain sqlite3 connection."""
    return [(r[1], r[2], r[3], r[5]) for r in rows(path, f'PRAGMA table_info("{table}")')]


def test_projection_schema_matches_section_6_for_every_type(tmp_path: Path) -> None:
    config = parse_config(SEED_YAML)
    paths = build_projection(config, ShardStore(tmp_path / "store"), tmp_path / "out")
    assert set(paths) == set(config.names)
    for name, path in paths.items():
        assert path == tmp_path / "out" / name / "ledger.db"
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
        schema = dict(rows(path, "SELECT name, type FROM sqlite_schema"))
        for table, columns in GENERIC.items():
            assert schema[table] == "table" and table_info(path, table) == columns, table
        for index, (table, columns) in INDEXES.items():  # type: ignore[assignment]
            assert schema[index] == "index"
            assert rows(path, f"SELECT tbl_name FROM sqlite_schema WHERE name = '{index}'") == [
                (table,)
            ]
            assert [r[2] for r in rows(path, f'PRAGMA index_info("{index}")')] == columns
        expected = NOTES_TABLES if name == "knowledge" else {"state": STATE.get(name)}
        if name == "audit":  # raw: the generic tables only
            assert "replay_metadata" not in schema and "state" not in schema
            continue
        assert table_info(path, "replay_metadata") == METADATA
        for table, columns in expected.items():  # type: ignore[assignment]
            assert schema[table] == "table" and table_info(path, table) == columns, table
            assert rows(path, f'SELECT count(*) FROM "{table}"') == [(0,)]
        meta = rows(path, "SELECT ledger_name, record_count, table_name FROM replay_metadata")
        # the reducer's table order, as the reference inserts them (issue 16 item 12)
        assert meta == [(name, 0, table) for table in expected]
        if name in SCRIPT_SHA:
            assert rows(path, "SELECT DISTINCT script_sha256 FROM replay_metadata") == [
                (SCRIPT_SHA[name],)
            ]


def test_projection_of_a_reference_format_directory(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    log_shard = write_shard(root, "history", [R1_LINE, R2_LINE])
    note_shard = write_shard(root, "knowledge", [NOTE_LINE])
    config = parse_config({"history": {"type": "log"}, "knowledge": {"type": "notes"}})
    paths = build_projection(config, ShardStore(root), tmp_path / "out")
    history = paths["history"]
    assert rows(history, "SELECT * FROM records ORDER BY ordinal") == [
        (
            0,
            "ldg-12345678-1234-4123-8123-123456789abc",
            R1_SHA,
            "ledger_append",
            TS,
            '{"id":"ldg-2f986608-3f62-446d-a894-4de896c343a0","operation":"append","value":"x"}',
            log_shard,
            0,
        ),
        (
            1,
            "ldg-12345678-1234-4123-8123-123456789abd",
            R2_SHA,
            "ledger_append",
            "2026-01-01T00:00:01.000Z",
            '{"id":"ldg-41d96d9a-a452-42b3-bfd0-fea0f3829ce6","operation":"append","value":"y"}',
            log_shard,
            len(R1_LINE) + 1,
        ),
    ]
    assert rows(history, "SELECT * FROM parents") == [(R2_SHA, R1_SHA)]
    size = len(R1_LINE) + len(R2_LINE) + 2
    assert rows(history, "SELECT * FROM shards") == [(log_shard, size)]
    assert rows(history, "SELECT * FROM diagnostics") == []
    assert rows(history, "SELECT * FROM state") == [(0, '"x"'), (1, '"y"')]
    assert rows(history, "SELECT ledger_name, projection_version, record_count, script_sha256,"
                " output_version, table_name, columns_json FROM replay_metadata") == [
        ("history", 1, 2, SCRIPT_SHA["history"], 1, "state",
         '{"position":"integer","value":"text"}')
    ]  # fmt: skip
    knowledge = paths["knowledge"]
    note_id = final_id("12345:1", 1)
    note_sha = Record.from_line(NOTE_LINE).sha
    assert rows(knowledge, "SELECT * FROM notes") == [
        (note_id, "README", "Documented", "Evidence", TS, note_sha)
    ]
    assert rows(knowledge, "SELECT * FROM note_citations") == [
        (note_id, 0, "repository", "README.md", None, None)
    ]
    assert rows(knowledge, "SELECT * FROM note_state") == [(note_id, 0, 0, 0, None, None)]
    assert rows(knowledge, "SELECT shard, offset FROM records") == [(note_shard, 0)]
    assert rows(knowledge, "SELECT table_name FROM replay_metadata") == [  # reference order
        ("notes",),
        ("note_citations",),
        ("note_votes",),
        ("note_state",),
    ]


def test_projection_fails_closed_per_ledger_and_quarantines_on_request(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_shard(root, "history", [R1_LINE, R2_LINE])
    bad = write_shard(root, "broken", [R1_LINE])
    (shard_dir(root, "broken") / bad).write_text(R1_LINE + "\n" + R2_LINE)  # truncated
    config = parse_config({"history": {"type": "log"}, "broken": {"type": "log"}})
    out = tmp_path / "out"
    with pytest.raises(ReplayError, match="broken") as info:
        build_projection(config, ShardStore(root), out)
    assert isinstance(info.value, LedgerError)
    assert (out / "history" / "ledger.db").is_file()
    assert not (out / "broken" / "ledger.db").exists()
    paths = build_projection(config, ShardStore(root), out, strict=False)
    assert rows(paths["broken"], "SELECT code, line FROM diagnostics") == [("truncated-record", 2)]
    assert rows(paths["broken"], "SELECT value FROM state") == [('"x"',)]


def test_projection_is_read_only_and_query_sql_is_select_only(tmp_path: Path) -> None:
    config = parse_config(SEED_YAML)
    store = ShardStore(tmp_path / "store")
    store.append("metrics", [{"operation": "increment", "name": "runs", "amount": 2}])
    path = build_projection(config, store, tmp_path / "out")["metrics"]
    assert query_sql(path, "SELECT name, value FROM state") == [{"name": "runs", "value": 2}]
    assert query_sql(path, "SELECT value FROM state WHERE name = ?", params=("runs",)) == [
        {"value": 2}
    ]
    assert len(query_sql(path, "SELECT * FROM records", limit=1)) == 1
    for sql in (
        "INSERT INTO state VALUES ('x', 1)",
        "UPDATE state SET value = 3",
        "DELETE FROM state",
        "DROP TABLE state",
        "CREATE TABLE x (a)",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA writable_schema = 1",
        "PRAGMA user_version = 7",
        "PRAGMA journal_mode = DELETE",
        "SELECT 1; DELETE FROM state",
        "VACUUM INTO 'copy.db'",
        "BEGIN",
        "SELECT load_extension('x')",
    ):
        with pytest.raises(QueryError):
            query_sql(path, sql)
    assert query_sql(path, "SELECT value FROM state") == [{"value": 2}]
    assert stat.S_IMODE(path.stat().st_mode) == 0o444


# --- tools, queue, artifact, persistence, query, evidence ----------------------------------


def test_tool_definitions_follow_the_reference_rules() -> None:
    def names(source: Any) -> list[str]:
        return [t.name for t in tool_definitions(parse_config(source))]

    assert "ledger_append" not in names({"m": {"type": "map"}, "n": {"type": "notes"}})
    assert names({"m": {"type": "map"}, "n": {"type": "notes"}, "h": {"type": "log"}}) == [
        "ledger_append",
        "ledger_map_put",
        "ledger_map_delete",
        "ledger_note_add",
        "ledger_note_vote",
        "ledger_query",
    ]
    tools = {
        t.name: t
        for t in tool_definitions(parse_config({"a": {"type": "notes"}, "b": {"type": "notes"}}))
    }
    add = tools["ledger_note_add"].input_schema
    assert add["properties"]["ledger"]["enum"] == ["a", "b"]
    assert set(add["required"]) == {"ledger", "subject", "note", "reason", "citations"}
    assert add["properties"]["subject"]["maxLength"] == 512
    assert add["properties"]["reason"]["maxLength"] == 1024
    citations = add["properties"]["citations"]
    assert (citations["minItems"], citations["maxItems"]) == (1, 32)
    assert citations["items"]["additionalProperties"] is False
    vote = tools["ledger_note_vote"].input_schema
    assert vote["properties"]["vote"]["enum"] == ["up", "down"]
    assert "reason" not in vote["required"]
    for tool in tools.values():
        mcp, openai = tool.to_mcp(), tool.to_openai()
        assert mcp["inputSchema"] == dict(tool.input_schema) and mcp["description"]
        assert openai["type"] == "function" and openai["function"]["name"] == tool.name


def test_end_to_end_tool_call_to_evidence(tmp_path: Path) -> None:
    config = parse_config(SEED_YAML)
    queue = IntentQueue(config)
    queued = {"success": True, "queued": True}
    note_args = {k: v for k, v in NOTE.items() if k != "operation"}
    assert queue.submit("ledger_note_add", {**note_args, "temp_id": "n"}) == queued
    assert (
        queue.submit("ledger_note_vote", {"ledger": "knowledge", "note_id": "#n", "vote": "up"})
        == queued
    )
    assert (
        queue.submit("ledger_map_put", {"key": "org/app", "value": {"token": "s3cr3t"}}) == queued
    )
    assert (
        queue.submit(
            "ledger_append",
            {"ledger": "metrics", "operation": "increment", "name": "runs", "amount": 2},
        )
        == queued
    )
    refused = queue.submit(
        "ledger_append",
        {"ledger": "metrics", "operation": "increment", "name": "runs", "amount": -1},
    )
    assert refused["success"] is False and refused["error"]
    artifact = queue.artifact("12345:1")
    assert set(artifact) == {"version", "transaction_id", "ledgers"}
    assert artifact == normalize_appends(config, list(queue.requests), "12345:1")
    appends = artifact["ledgers"]["knowledge"]["appends"]
    assert appends[0]["record"]["id"] == final_id("12345:1", 0)
    assert appends[1]["record"]["note_id"] == final_id("12345:1", 0)

    store = ShardStore(tmp_path / "store")
    result = persist(config, store, artifact, now=TS)
    assert "s3cr3t" not in repr(result)
    knowledge = result["ledgers"]["knowledge"]
    assert (knowledge["persisted"], knowledge["notes_added"], knowledge["upvotes"]) == (2, 1, 1)
    assert knowledge["transactions"] == [  # the reference's four keys, nothing more
        {
            "id": final_id("12345:1", i),
            "transaction_id": "12345:1",
            "operation": op,
            "validated": True,
        }
        for i, op in ((0, "note"), (1, "vote"))
    ]
    again = persist(config, store, artifact, now=TS)
    assert again["ledgers"]["knowledge"]["already_present"] == 2

    paths = build_projection(config, store, tmp_path / "out")
    assert query_sql(paths["knowledge"], "SELECT upvotes, net_votes FROM note_state") == [
        {"upvotes": 1, "net_votes": 1}
    ]
    assert query_sql(paths["metrics"], "SELECT value FROM state") == [{"value": 2}]
    page = query_records(store, "repositories", where={"payload.key": {"eq": "org/app"}})
    assert len(page.records) == 1 and page.next_cursor is None
    assert page.records[0].payload["id"] == final_id("12345:1", 2)

    note = store.read("knowledge").records[0]
    resolver = LedgerResolver(store, config)
    checks = verify_refs(
        [
            Ref(source="ledger", id=note.id, hash=note.sha),
            Ref(source="ledger", id=note.id, hash="sha256:" + "0" * 64),
            Ref(source="ledger", id=final_id("nowhere", 0), hash=note.sha),
        ],
        resolver,
    )
    assert [c.state for c in checks] == [RefState.INTACT, RefState.DRIFTED, RefState.MISSING]


def test_persist_refuses_hostile_artifacts_and_writes_nothing(tmp_path: Path) -> None:
    config = parse_config(SEED_YAML)
    store = ShardStore(tmp_path / "store")
    good = normalize_appends(
        config, [{"ledger": "metrics", "operation": "increment", "name": "a", "amount": 1}], "t:1"
    )
    hostile: list[Any] = [
        None,
        [],
        {**good, "version": 2},
        {**good, "ledgers": []},
        {**good, "extra": 1},
        {**good, "transaction_id": ""},
        {**good, "ledgers": {"unknown": good["ledgers"]["metrics"]}},
    ]
    entry = good["ledgers"]["metrics"]["appends"][0]
    for change in (
        {"index": 1},
        {"ledger": "history"},
        {"record": {**entry["record"], "id": final_id("t:1", 5)}},
        {"record": {**entry["record"], "amount": -1}},
        {"record": {**entry["record"], "parents": []}},
    ):
        hostile.append({**good, "ledgers": {"metrics": {"appends": [{**entry, **change}]}}})
    for artifact in hostile:
        with pytest.raises(PersistError):
            persist(config, store, artifact)
    assert not (tmp_path / "store" / "ledgers").exists()
    persist(config, store, good)
    assert len(store.read("metrics").records) == 1


def test_compaction_is_lossless(tmp_path: Path) -> None:
    config = parse_config(
        {"h": {"type": "log", "compaction": {"min-segments": 2, "max-segments": 8}}}
    )
    store = ShardStore(tmp_path)
    for value in "abc":
        store.append("h", [{"operation": "append", "value": value}])
    before = replay(config["h"], store.read("h").records).tables
    plan = plan_compaction(config, store, "h")
    assert plan is not None and len(plan["sources"]) == 3
    assert apply_compaction(config, store, plan).status == "ready"
    assert len(list(shard_dir(tmp_path, "h").glob("*.jsonl"))) == 1
    assert replay(config["h"], store.read("h").records).tables == before
    assert apply_compaction(config, store, plan).status == "already_applied"
    tampered = {**plan, "plan_id": "sha256:" + "0" * 64}
    assert apply_compaction(config, store, tampered).status == "rejected"
