"""Findings of a new user's trial: a demo refused before it records anything, empty
time windows, wrapped text that keeps every letter, error lines that name the file, help
that lists every subcommand, and why/chain output that keeps the whole reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.chain.views import raw_json_value as json_value
from ledger.report.hashes import HashCheck

from .conftest import Ledger, invoke, run_cli, sqlite_url

NARROW = {"COLUMNS": "80"}


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _runs(url: str) -> int:
    return len(json.loads(invoke("runs", "--db", url, "--json").stdout))


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("other:\n  type: log\n", "no `knowledge` notes ledger"),
        ("knowledge:\n  type: set\n", "no `knowledge` notes ledger"),
        ("knowledge:\n  type: [\n", "not valid YAML"),
    ],
)
def test_demo_with_a_bad_config_records_nothing(
    config: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ledger-demo").mkdir()
    (tmp_path / "ledger-demo" / "ledger.yaml").write_text(config)
    for _attempt in range(3):
        result = invoke("demo")
        assert result.exit_code == 1
        (line,) = result.stderr.splitlines()
        assert words in line, line
    assert not (tmp_path / "ledger.db").exists()  # no run, not even an empty ledger
    assert not (tmp_path / "ledger-demo" / "agent").exists()  # nor the approved write


def test_demo_with_a_store_that_does_not_replay_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("demo").exit_code == 0
    shards = tmp_path / "ledger-demo" / "store" / "ledgers" / "knowledge" / "ledger" / "shards"
    (shards / "9b1c6f0e-8f43-4c1e-9d8a-0a0b0c0d0e0f.jsonl").write_text("not json\n")
    result = invoke("demo")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "does not replay" in line and "--dir" in line
    assert _runs(sqlite_url(tmp_path / "ledger.db")) == 1


@pytest.mark.parametrize("folder", ["agent", "transactions", "store"])
def test_demo_with_a_file_where_a_folder_goes_records_nothing(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ledger-demo").mkdir()
    (tmp_path / "ledger-demo" / folder).write_text("in the way\n")
    result = invoke("demo")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert f"{folder} is not a folder" in line and "--dir" in line
    assert not (tmp_path / "ledger.db").exists()


@pytest.mark.parametrize("command", ["report", "events", "runs"])
@pytest.mark.parametrize(
    ("since", "until"), [("2027-01-01", "2026-01-01"), ("2026-01-01", "2026-01-01")]
)
def test_an_empty_or_reversed_window_is_a_usage_error(
    command: str, since: str, until: str, sqlite_ledger: Ledger
) -> None:
    for extra in ((), ("--json",) if command != "report" else ("--format", "json")):
        result = invoke(
            command, "--db", sqlite_ledger.url, "--since", since, "--until", until, *extra
        )
        assert result.exit_code == 2, result.stdout
        assert result.stdout == ""
        assert f"--since {since}T00:00:00Z" in result.stderr
        assert f"--until {until}T00:00:00Z" in result.stderr


def test_one_sided_and_ordered_windows_still_work(sqlite_ledger: Ledger) -> None:
    url = sqlite_ledger.url
    assert invoke("runs", "--db", url, "--since", "2001-01-01").exit_code == 0
    assert invoke("events", "--db", url, "--until", "2001-01-01").exit_code == 0
    ok = invoke("report", "--db", url, "--since", "2001-01-01", "--until", "2001-01-02")
    assert ok.exit_code == 0


@pytest.mark.parametrize("columns", ["80", "60"])
def test_events_detail_wraps_without_losing_letters(columns: str, sqlite_ledger: Ledger) -> None:
    result = invoke(
        "events", "--db", sqlite_ledger.url, "--kind", "action", env={"COLUMNS": columns}
    )
    assert result.exit_code == 0
    width = int(columns)
    assert all(len(line) <= width for line in result.stdout.splitlines()), result.stdout
    detail_at = result.stdout.splitlines()[1].index("detail")
    column = "".join(line[detail_at:] for line in result.stdout.splitlines()[3:])
    reason = "dangerous shell command refused: 'sudo rm -rf /'"
    assert _squeezed(reason) in _squeezed(column), column
    last = re.search(r"tail with --after\s+(\w+)\)", result.stdout)  # the id is whole
    assert last is not None and len(last.group(1)) == 26


def test_persist_names_the_missing_artifact(tmp_path: Path) -> None:
    config = tmp_path / "ledger.yaml"
    config.write_text("knowledge:\n  type: notes\n")
    missing = tmp_path / "sub" / "MISSING.json"
    result = invoke("typed", "persist", str(config), "--store", str(tmp_path / "s"), str(missing))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert str(missing) in line and "No such file or directory" in line
    assert not (tmp_path / "s").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = invoke("typed", "persist", str(config), "--store", str(tmp_path / "s"), str(bad))
    assert result.exit_code == 1 and str(bad) in result.stderr and "invalid JSON" in result.stderr


@pytest.mark.parametrize("url", ["jsonl:///x.jsonl", "x.jsonl", "discard:"])
@pytest.mark.parametrize("command", ["check", "upgrade"])
def test_db_commands_suggest_only_urls_they_take(command: str, url: str, tmp_path: Path) -> None:
    result = run_cli("db", command, url, cwd=tmp_path)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert "sqlite:///FILE" in line and "postgresql://" in line
    assert "jsonl:///FILE" not in line, line
    assert not (tmp_path / "x.jsonl").exists()


def test_db_commands_take_a_bare_path_as_sqlite(tmp_path: Path) -> None:
    missing = run_cli("db", "check", "ledger.db", cwd=tmp_path)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert not (tmp_path / "ledger.db").exists()  # a check never creates
    made = run_cli("db", "upgrade", "ledger.db", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "ledger.db").is_file()
    assert run_cli("db", "check", "ledger.db", cwd=tmp_path).returncode == 0
    passwd = run_cli("db", "check", "/etc/passwd", cwd=tmp_path)
    assert passwd.returncode == 1 and "not a SQLite database" in passwd.stderr


def test_an_unavailable_hash_check_always_says_why() -> None:
    assert HashCheck(available=False).summary().split(": ", 1)[1].strip()
    assert HashCheck(available=False, note="a JSONL file").summary().endswith("a JSONL file")


@pytest.mark.parametrize("group", ["typed", "db"])
def test_group_summaries_list_every_subcommand(group: str) -> None:
    from ledger.cli import cli

    command = cli.commands[group]
    assert hasattr(command, "commands")
    names = sorted(command.commands)
    root = invoke("--help").stdout
    summary = next(line for line in root.splitlines() if line.strip().startswith(group + " "))
    own = invoke(group, "--help").stdout.split("Options:")[0]
    for name in names:
        assert re.search(rf"\b{name}\b", summary), (name, summary)
        assert re.search(rf"\b{name}\b", own), (name, own)


def test_why_and_chain_json_embed_args_and_result(sqlite_ledger: Ledger) -> None:
    url, run = sqlite_ledger.url, sqlite_ledger.run_id
    why = json.loads(invoke("why", run, sqlite_ledger.write_call, "--db", url, "--json").stdout)
    assert why["args"]["path"] == "notes.tidy.txt" and why["result"] == 115
    assert isinstance(why["request"]["args"], str)  # the request's args is a JSON string
    assert why["request"]["args"].startswith("Tidy my notes")
    chain = json.loads(invoke("chain", run, "--db", url, "--json").stdout)
    write = next(a for a in chain["actions"] if a["call_id"] == sqlite_ledger.write_call)
    assert write["args"] == why["args"] and write["result"] == 115
    events = invoke("events", "--db", url, "--run", run, "--kind", "action", "--nl")
    raw = [json.loads(line) for line in events.stdout.splitlines()]
    assert next(e for e in raw if e["call_id"] == sqlite_ledger.write_call)["args"] == write["args"]
    denied = json.loads(invoke("why", run, sqlite_ledger.shell_call, "--db", url, "--json").stdout)
    assert denied["args"] == {"command": "sudo rm -rf /"} and denied["result"] is None


def test_json_value_keeps_what_it_cannot_parse() -> None:
    assert json_value(None) is None
    assert json_value('{"a":[1,2]}') == {"a": [1, 2]}
    assert json_value('"x"') == "x"
    assert json_value("not json") == "not json"


def test_why_shows_the_whole_reason_and_chain_a_long_one(sqlite_ledger: Ledger) -> None:
    url, run = sqlite_ledger.url, sqlite_ledger.run_id
    reason = json.loads(invoke("why", run, sqlite_ledger.write_call, "--db", url, "--json").stdout)[
        "reason"
    ]
    assert len(reason) > 200  # long enough to have been cut before
    for columns in (80, 160):
        env = {"COLUMNS": str(columns)}
        text = invoke("why", run, sqlite_ledger.write_call, "--db", url, env=env).stdout
        block = text.split("  reason:", 1)[1].split("  args:", 1)[0]
        assert "…" not in block
        assert _squeezed(block) == _squeezed(reason)
        assert all(len(line) <= columns for line in block.splitlines())
    tree = invoke("chain", run, "--db", url, env=NARROW).stdout
    branch = tree.split("reason: non-safe", 1)[1].split("├── approved by:", 1)[0]
    assert _squeezed("non-safe" + branch.replace("│", "")) == _squeezed(reason)
