"""``ledger typed check / persist / project / query / sql / compact``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.typed import IntentQueue, parse_config, write_artifact

from .conftest import invoke

CONFIG = """\
findings:
  type: table
  key: id
knowledge:
  type: notes
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def _artifact(tmp_path: Path, tx: str, finding: str) -> Path:
    queue = IntentQueue(parse_config(CONFIG))
    answer = queue.submit(
        "ledger_append",
        {"ledger": "findings", "operation": "insert", "value": {"id": finding, "sev": "high"}},
    )
    assert answer["success"], answer
    path = tmp_path / f"{tx}.json"
    write_artifact(path, queue.artifact(tx))
    return path


def test_check_valid_config(config: Path) -> None:
    result = invoke("typed", "check", str(config), "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["valid"] and [x["name"] for x in data["ledgers"]] == ["findings", "knowledge"]
    assert "2 ledger(s)" in invoke("typed", "check", str(config)).stdout


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("a:\n  type: log\nb:\n  type: countr\n", ":4:3:", "tools.ledger.b.type must be one of"),
        ("a:\n  type: table\n", ":1:1:", "key is required"),
        ("a:\n  type: log\n  colour: red\n", ":3:3:", 'unsupported property "colour"'),
        ("a: [1,\n", ":2:1:", "not valid YAML"),
        ("tools:\n  ledger:\n    a:\n      type: nope\n", ":4:7:", "a.type must be one of"),
    ],
)
def test_check_reports_line_precise_errors(
    tmp_path: Path, text: str, where: str, words: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    result = invoke("typed", "check", str(path))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ledger: error: {path}{where}"), line
    assert words in line


def test_persist_project_query_sql_compact(config: Path, tmp_path: Path) -> None:
    store, out = str(tmp_path / "store"), str(tmp_path / "proj")
    for i in range(3):
        done = invoke("typed", "persist", str(config), "--store", store,
                      str(_artifact(tmp_path, f"tx-{i}", f"F-{i}")))  # fmt: skip
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["ledgers"]["findings"]["persisted"] == 1
    projected = invoke("typed", "project", str(config), "--store", store, "--out", out, "--json")
    assert projected.exit_code == 0, projected.stderr
    paths = json.loads(projected.stdout)
    assert set(paths) == {"findings", "knowledge"}
    rows = invoke("typed", "sql", paths["findings"], "SELECT key FROM state ORDER BY key")
    assert [r["key"] for r in json.loads(rows.stdout)] == ["F-0", "F-1", "F-2"]
    refused = invoke("typed", "sql", paths["findings"], "DELETE FROM state")
    assert refused.exit_code == 1 and refused.stderr.startswith("ledger: error:")
    page = invoke("typed", "query", str(config), "--store", store, "--ledger", "findings",
                  "--where", '{"payload.value.id": {"eq": "F-1"}}')  # fmt: skip
    assert [r["payload"]["value"]["id"] for r in json.loads(page.stdout)["records"]] == ["F-1"]
    unknown = invoke("typed", "query", str(config), "--store", store, "--ledger", "nope")
    assert unknown.exit_code == 1
    compact = invoke("typed", "compact", str(config), "--store", store, "--ledger", "findings",
                     "--json")  # fmt: skip
    assert compact.exit_code == 0, compact.stderr
    assert json.loads(compact.stdout)["status"] in {"ready", "nothing_to_do"}
    again = invoke("typed", "project", str(config), "--store", store, "--out", out)
    assert again.exit_code == 0 and "2 projection(s)" in again.stdout


def test_persist_of_a_bad_artifact_fails_cleanly(config: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1}', encoding="utf-8")
    result = invoke("typed", "persist", str(config), "--store", str(tmp_path / "s"), str(bad))
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1


def test_project_of_a_corrupt_store_fails_in_one_line(config: Path, tmp_path: Path) -> None:
    shards = tmp_path / "store" / "ledgers" / "findings" / "ledger" / "shards"
    shards.mkdir(parents=True)
    (shards / "9b1c6f0e-8f43-4c1e-9d8a-0a0b0c0d0e0f.jsonl").write_text("not json\n")
    args = ("typed", "project", str(config), "--store", str(tmp_path / "store"))
    result = invoke(*args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("ledger: error: ") and "findings" in line
    lenient = invoke(*args, "--out", str(tmp_path / "out2"), "--lenient", "--json")
    data = json.loads(lenient.stdout)  # with --lenient: the paths, and what was quarantined
    assert lenient.exit_code == 0 and set(data["projections"]) == {"findings", "knowledge"}
    assert any(data["quarantined"].values())


@pytest.fixture
def bare_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import subprocess

    monkeypatch.setenv("AGENTLEDGER_GIT_CACHE", str(tmp_path / "git-cache"))
    repo = tmp_path / "ledgers.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    return repo


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_every_store_command_works_on_a_git_repository(
    config: Path, tmp_path: Path, bare_repo: Path, form: str
) -> None:
    import subprocess

    store = "git+" + (str(bare_repo) if form == "path" else bare_repo.as_uri())
    for i in range(3):
        done = invoke("typed", "persist", str(config), "--store", store,
                      str(_artifact(tmp_path, f"tx-{i}", f"F-{i}")))  # fmt: skip
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["ledgers"]["findings"]["persisted"] == 1
    branches = subprocess.run(
        ["git", "--git-dir", str(bare_repo), "branch", "--list"], capture_output=True, text=True
    ).stdout.split()
    assert branches == ["ledgers/findings"]
    out = str(tmp_path / "proj")
    projected = invoke("typed", "project", str(config), "--store", store, "--out", out, "--json")
    assert projected.exit_code == 0, projected.stderr
    rows = invoke("typed", "sql", json.loads(projected.stdout)["findings"], "SELECT key FROM state")
    assert sorted(r["key"] for r in json.loads(rows.stdout)) == ["F-0", "F-1", "F-2"]
    page = invoke("typed", "query", str(config), "--store", store, "--ledger", "findings",
                  "--where", '{"payload.value.id": {"eq": "F-1"}}')  # fmt: skip
    assert [r["payload"]["value"]["id"] for r in json.loads(page.stdout)["records"]] == ["F-1"]
    checked = invoke("typed", "check", str(config), "--store", store, "--json")
    assert checked.exit_code == 0, checked.stderr
    assert {x["name"]: x["records"] for x in json.loads(checked.stdout)["ledgers"]} == {
        "findings": 3,
        "knowledge": 0,
    }
    compact = invoke("typed", "compact", str(config), "--store", store, "--ledger", "findings",
                     "--json")  # fmt: skip
    assert compact.exit_code == 0, compact.stderr


def test_a_git_store_that_is_not_a_repository_is_one_line(config: Path, tmp_path: Path) -> None:
    result = invoke("typed", "project", str(config), "--store", f"git+{tmp_path}", "--out",
                    str(tmp_path / "o"))  # fmt: skip
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "is not a git repository" in line


def test_check_with_a_store_reports_warnings_and_ignored_keywords(tmp_path: Path) -> None:
    from ledger.typed import Record, final_id

    path = tmp_path / "ledger.yaml"
    path.write_text("log:\n  type: log\n  schema:\n    type: integer\n    minimum: 1\n")
    record = Record.new(
        id=final_id("t", 0), timestamp="2026-01-01T00:00:00.000Z", parents=(),
        payload={"operation": "append", "value": 5},
    )  # fmt: skip
    shards = tmp_path / "store" / "ledgers" / "log" / "ledger" / "shards"
    shards.mkdir(parents=True)
    (shards / "9b1c6f0e-8f43-4c1e-9d8a-0a0b0c0d0e0f.jsonl").write_text(
        (record.to_line() + "\n") * 2
    )
    result = invoke("typed", "check", str(path), "--store", str(tmp_path / "store"))
    assert result.exit_code == 0, result.stderr
    assert "does not enforce minimum" in result.stdout
    assert "warning: log: duplicate-id" in result.stdout
    (shards / "9b1c6f0e-8f43-4c1e-9d8a-0a0b0c0d0e0f.jsonl").write_text("not json\n")
    broken = invoke("typed", "check", str(path), "--store", str(tmp_path / "store"), "--json")
    assert broken.exit_code == 1
    assert json.loads(broken.stdout)["ledgers"][0]["diagnostics"][0].startswith("invalid-json")
