"""typed project --lenient says what it quarantined; typed persist and query as
listings (--nl, --csv)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ledger.typed import ShardStore, parse_config

from .conftest import invoke

CONFIG = "facts:\n  type: log\n"


def _store(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "ledger.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    store = ShardStore(tmp_path / "store", parse_config({"facts": {"type": "log"}}))
    store.append("facts", [{"operation": "append", "value": v} for v in ("a", "b", "c")])
    return config, tmp_path / "store"


def test_lenient_projection_lists_what_it_quarantined(tmp_path: Path) -> None:
    config, store = _store(tmp_path)
    (shard,) = store.rglob("*.jsonl")
    shard.write_text(shard.read_text().replace('"value":"b"', '"value":"B"'))  # sha stale
    out = tmp_path / "out"
    strict = invoke("typed", "project", str(config), "--store", str(store), "--out", str(out))
    assert strict.exit_code != 0
    human = invoke(
        "typed", "project", str(config), "--store", str(store), "--out", str(out), "--lenient"
    )
    assert human.exit_code == 0, human.stderr
    assert "quarantined" in human.stdout and "invalid-sha" in human.stdout
    data = json.loads(
        invoke(
            "typed", "project", str(config), "--store", str(store), "--out", str(out),
            "--lenient", "--json",
        ).stdout
    )  # fmt: skip
    codes = {(q["code"], q["line"]) for q in data["quarantined"]["facts"]}
    assert codes == {("invalid-sha", 2), ("missing-parent", 3)}  # the edit, and its child


def test_query_as_ndjson_and_csv(tmp_path: Path) -> None:
    config, store = _store(tmp_path)
    args = ("typed", "query", str(config), "--store", str(store), "--ledger", "facts")
    full = json.loads(invoke(*args).stdout)["records"]
    lines = [json.loads(x) for x in invoke(*args, "--nl").stdout.splitlines()]
    rows = list(csv.DictReader(io.StringIO(invoke(*args, "--csv").stdout)))
    assert lines == full and [r["id"] for r in rows] == [r["id"] for r in full]
    assert json.loads(rows[0]["payload"]) == full[0]["payload"]
    paged = invoke(*args, "--nl", "--limit", "1")
    assert len(paged.stdout.splitlines()) == 1 and "--after sha256:" in paged.stderr


def test_persist_rows_as_ndjson(tmp_path: Path) -> None:
    from ledger.typed import normalize_appends, write_artifact

    config, store = _store(tmp_path)
    parsed = parse_config({"facts": {"type": "log"}})
    artifact = normalize_appends(
        parsed, [{"ledger": "facts", "operation": "append", "value": "d"}], "t-1"
    )
    path = tmp_path / "artifact.json"
    write_artifact(path, artifact)
    result = invoke("typed", "persist", str(config), "--store", str(store), str(path), "--nl")
    assert result.exit_code == 0, result.stderr
    (row,) = [json.loads(x) for x in result.stdout.splitlines()]
    assert row["ledger"] == "facts" and row["transaction_id"] == "t-1"
