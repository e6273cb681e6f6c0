"""parse_config: both forms, every key and bound, schema safety, the serialized limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import ConfigError
from ledger.typed import LedgerConfig, parse_config


def test_single_form_and_defaults() -> None:
    config = parse_config({"schema": {"type": "object"}, "max-record-kb": 8})
    (only,) = config.ledgers
    assert only.name == "default" and only.type is None and only.max_record_kb == 8
    assert (only.max_segment_kb, only.max_patch_kb) == (100, 10)
    assert only.branch_name == "ledgers/default"
    assert only.compaction.enabled and only.compaction.schedule == "daily"
    assert (only.compaction.min_segments, only.compaction.max_segments) == (32, 128)


@pytest.mark.parametrize("source", [None, {}, "", "{}"])
def test_empty_gives_default(source: Any) -> None:
    assert parse_config(source).names == ("default",)


def test_named_form_sorted_and_lookup() -> None:
    config = parse_config({"findings": {"type": "table", "key": "id"}, "experiments": {}})
    assert config.names == ("experiments", "findings")
    assert config["findings"].key == "id" and "experiments" in config
    with pytest.raises(KeyError):
        config["nope"]
    assert isinstance(config, LedgerConfig)


def test_yaml_text_and_names_that_look_like_keys() -> None:
    config = parse_config(
        "history:\n  type: log\n  schema: {type: string}\nmetrics:\n  type: counter\n"
    )
    assert [(d.name, d.type) for d in config] == [("history", "log"), ("metrics", "counter")]
    assert parse_config({"type": {}, "key": {}}).names == ("key", "type")
    assert parse_config({"replay": {}}).names == ("replay",)
    assert parse_config("type: log").ledgers[0].type == "log"


def test_compaction_shaped_value_selects_single_form() -> None:
    assert parse_config({"compaction": False}).ledgers[0].compaction.enabled is False
    policy = parse_config({"compaction": {"min-segments": 200}}).ledgers[0].compaction
    assert (policy.min_segments, policy.max_segments) == (200, 200)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ([], "tools.ledger must be an object"),
        ({"x": 1}, "tools.ledger.x must be an object"),
        ({"bad name": {}}, "must contain only letters, numbers, hyphens, and underscores"),
        ({"-x": {}}, "must contain only letters"),
        ({"x": {"type": "unknown"}}, "type must be one of: log, set, map, table, counter, notes"),
        ({"x": {"type": "claims"}}, "Unknown built-in ledger type"),
        ({"x": {"type": "log", "key": "id"}}, "key is required only for type: table"),
        ({"x": {"type": "table"}}, "key is required"),
        ({"x": {"type": "table", "key": "1id"}}, "must be a valid primary key field"),
        ({"x": {"type": "counter", "schema": {}}}, "counter does not accept a value schema"),
        ({"x": {"type": "notes", "schema": {}}}, "notes does not accept a value schema"),
        ({"x": {"type": "notes", "key": "id"}}, "key is required only for type: table"),
        (
            {"x": {"type": "set", "replay": {"script": "x"}}},
            "Custom ledger replay is no longer supported",
        ),
        ({"x": {"replay": None}}, "Custom ledger replay is no longer supported"),
        ({"x": {"replay": {}}}, "Custom ledger replay is no longer supported"),
        ({"replay": {"script": "x"}}, "Custom ledger replay is no longer supported"),
        ({"x": {"type": "set", "identity": "a"}}, 'has unsupported property "identity"'),
        ({"x": {"max-record-kb": 0}}, "must be a positive integer"),
        ({"x": {"max-record-kb": True}}, "must be a positive integer"),
        ({"x": {"max-record-kb": 1.5}}, "must be a positive integer"),
        ({"x": {"max-patch-kb": 10241}}, "must be a positive integer"),
        ({"x": {"max-record-kb": 33}}, "max-record-kb cannot exceed 32"),
        ({"x": {"max-record-kb": 16, "max-segment-kb": 8}}, "cannot exceed max-segment-kb"),
        ({"x": {"compaction": {"every": 1}}}, 'unsupported property "every" (supported: schedule'),
        ({"x": {"compaction": {"script": "x"}}}, "script is not supported"),
        ({"x": {"compaction": {"schedule": "hourly"}}}, "schedule must be one of"),
        ({"x": {"compaction": {"min-segments": 1}}}, "from 2 to 256"),
        ({"x": {"compaction": {"min-segments": 10, "max-segments": 5}}}, "cannot be less than"),
        ({"x": {"schema": {"properties": {"${{ x }}": {}}}}}, "expressions"),
        ({"x": {"schema": {"description": "a ${{ secrets.X }}"}}}, "expressions"),
        ({"x": {"schema": {"oneOf": True}}}, "invalid JSON Schema"),
        ({"x": {"schema": "../schema.json"}}, "repository-relative"),
        ({"x": {"schema": "/etc/passwd"}}, "repository-relative"),
        ({"x": {"schema": "a/${x}.json"}}, "repository-relative"),
        ({"x": {"schema": 5}}, "JSON Schema object"),
    ],
)
def test_errors_carry_reference_wording(source: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("$", r"\$")):
        parse_config(source)


def test_whole_floats_accepted() -> None:
    assert parse_config({"x": {"max-record-kb": 4.0}})["x"].max_record_kb == 4


def test_deep_schema_refused() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(40):
        schema = {"items": schema}
    with pytest.raises(ConfigError, match="too deeply nested"):
        parse_config({"x": {"schema": schema}})


def test_schema_paths_resolve_from_repository_root(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "f.json").write_text(json.dumps({"type": "object", "required": ["id"]}))
    (tmp_path / "schemas" / "list.json").write_text("[1]")
    nested = tmp_path / "sub" / "dir"
    nested.mkdir(parents=True)
    config = parse_config({"f": {"type": "map", "schema": "schemas/f.json"}}, base_dir=nested)
    assert config["f"].schema == {"type": "object", "required": ["id"]}
    with pytest.raises(ConfigError, match="cannot resolve"):
        parse_config({"f": {"schema": "schemas/missing.json"}}, base_dir=nested)
    with pytest.raises(ConfigError, match="must contain a JSON Schema object"):
        parse_config({"f": {"schema": "schemas/list.json"}}, base_dir=nested)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text("{}")
    (tmp_path / "schemas" / "link.json").symlink_to(outside)
    with pytest.raises(ConfigError, match="must resolve inside the repository"):
        parse_config({"f": {"schema": "schemas/link.json"}}, base_dir=tmp_path)
    (tmp_path / "schemas" / "big.json").write_text(" " * 1_048_577 + "{}")
    with pytest.raises(ConfigError, match="no larger than 1048576 bytes"):
        parse_config({"f": {"schema": "schemas/big.json"}}, base_dir=tmp_path)


def test_serialized_limit() -> None:
    big = {"description": "x" * 64 * 1024}
    parse_config({"a": {"schema": big}})
    with pytest.raises(ConfigError, match="exceeds the 98304-byte environment limit"):
        parse_config({"a": {"schema": big}, "b": {"schema": big}})


def test_serialized_form_is_base64_json_array() -> None:
    import base64

    config = parse_config({"f": {"type": "table", "key": "id", "compaction": False}})
    entries = json.loads(base64.b64decode(config.serialized_base64()))
    assert entries == [
        {
            "name": "f",
            "type": "table",
            "key": "id",
            "max_record_kb": 32,
            "max_segment_kb": 100,
            "max_patch_kb": 10,
            "branch_name": "ledgers/f",
        }
    ]


def test_serialized_config_round_trips_with_runtime_checks() -> None:
    import base64

    from ledger.typed.config import parse_serialized_config

    config = parse_config(
        {"f": {"type": "table", "key": "id", "schema": {"type": "object"}}, "h": {}}
    )
    again = parse_serialized_config(config.serialized_base64())
    assert [(d.name, d.type, d.key, d.schema) for d in again] == [
        (d.name, d.type, d.key, d.schema) for d in config
    ]

    def encode(entries: object) -> str:
        return base64.b64encode(json.dumps(entries).encode()).decode()

    entry = {"name": "x", "max_record_kb": 32, "max_segment_kb": 100, "max_patch_kb": 10}
    with pytest.raises(ConfigError, match="Invalid trusted ledger configuration"):
        parse_serialized_config("%%%")
    with pytest.raises(ConfigError, match="Invalid trusted ledger configuration"):
        parse_serialized_config(encode({"name": "x"}))
    for bad in (
        {**entry, "max_record_kb": 33},
        {**entry, "max_segment_kb": 16, "max_record_kb": 32},
        {**entry, "name": "../x"},
        {**entry, "type": "table"},
    ):
        with pytest.raises(ConfigError, match="Invalid trusted ledger definition"):
            parse_serialized_config(encode([bad]))
    with pytest.raises(ConfigError, match="Invalid trusted ledger definition"):
        parse_serialized_config(encode([entry, entry]))
    with pytest.raises(ConfigError, match="Custom ledger replay is no longer supported"):
        parse_serialized_config(encode([{**entry, "replay": None}]))


def test_remote_schema_references_are_refused_offline() -> None:
    with pytest.raises(ConfigError, match="invalid JSON Schema"):
        parse_config({"x": {"type": "log", "schema": {"$ref": "https://example.invalid/s.json"}}})
    local = {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}
    assert parse_config({"x": {"type": "log", "schema": local}})["x"].schema == local
