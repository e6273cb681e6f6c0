"""The typed-ledger public names users import, and the light `import ledger`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ledger.typed
from ledger.typed import LedgerQueryTool, parse_config, read_artifact, write_artifact


def test_design_names_are_exported() -> None:
    for name in ("read_artifact", "write_artifact", "LedgerQueryTool", "ShardStore", "persist"):
        assert name in ledger.typed.__all__
        assert getattr(ledger.typed, name) is not None


def test_artifact_round_trip_through_public_names(tmp_path: Path) -> None:
    path = write_artifact(tmp_path / "t.json", {"version": 1, "appends": []})
    assert read_artifact(path) == {"version": 1, "appends": []}


def test_query_tool_is_usable_from_the_facade(tmp_path: Path) -> None:
    config = parse_config({"findings": {"type": "table", "key": "id"}})
    store = ledger.typed.ShardStore(tmp_path, config)
    store.append("findings", [{"operation": "insert", "value": {"id": "a"}}])
    answer = LedgerQueryTool(config, store)(ledger="findings")
    assert answer["success"] and [r["payload"]["value"]["id"] for r in answer["records"]] == ["a"]


def test_import_ledger_does_not_load_the_typed_engine() -> None:
    code = "import sys, ledger, ledger.cli.main; print('ledger.typed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_open_store_reads_a_location_string(tmp_path: Path) -> None:
    import pytest

    from ledger.typed import GitShardStore, ShardStore, StoreError, open_store

    assert isinstance(open_store(tmp_path), ShardStore)
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "missing", must_exist=True)
    with pytest.raises(StoreError, match="needs a repository"):
        open_store("git+")
    with pytest.raises(StoreError, match="is not a git repository"):
        open_store(f"git+{tmp_path}")
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "r.git")], check=True)
    assert isinstance(open_store(f"git+{tmp_path / 'r.git'}"), GitShardStore)
