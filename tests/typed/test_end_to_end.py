"""The whole path: tool call → queue → artifact → persist → projection → query → evidence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ledger.drift import RefState, verify_refs
from ledger.typed.config import parse_config
from ledger.typed.intents import IntentQueue
from ledger.typed.persist import persist
from ledger.typed.projection import build_projection
from ledger.typed.query import LedgerQueryTool, query_sql
from ledger.typed.resolver import LedgerResolver, record_ref
from ledger.typed.store import ShardStore
from ledger.typed.tools import openai_tools
from ledger.typed.transactions import read_artifact, write_artifact

REPO = Path(__file__).resolve().parents[2]
CONFIG = """
metrics: {type: counter}
repos: {type: map}
knowledge: {type: notes}
"""


def test_tool_call_to_query(tmp_path: Path) -> None:
    config = parse_config(CONFIG)
    assert [t["function"]["name"] for t in openai_tools(config)] == [
        "ledger_append",
        "ledger_map_put",
        "ledger_map_delete",
        "ledger_note_add",
        "ledger_note_vote",
        "ledger_query",
    ]
    store = ShardStore(tmp_path / "store", config)
    queue = IntentQueue(config)
    tools = queue.functions()
    answers = [
        tools["ledger_append"](operation="increment", name="runs", amount=2),
        tools["ledger_map_put"](key="org/app", value={"stars": 3}),
        tools["ledger_note_add"](
            subject="build",
            note="make test runs the suite",
            reason="Read the Makefile",
            citations=[{"type": "repository", "path": "Makefile", "start_line": 1, "end_line": 4}],
            temp_id="build",
        ),
        tools["ledger_note_vote"](note_id="#build", vote="up"),
    ]
    assert answers == [{"success": True, "queued": True}] * 4
    path = write_artifact(tmp_path / "ledger-transactions.json", queue.artifact("7:1"))
    result = persist(config, store, read_artifact(path))
    assert {name: entry["persisted"] for name, entry in result["ledgers"].items()} == {
        "knowledge": 2,
        "metrics": 1,
        "repos": 1,
    }
    assert "org/app" not in json.dumps(result)

    paths = build_projection(config, store, tmp_path / "projections")
    state = query_sql(paths["metrics"], "SELECT name, value FROM state")
    assert state == [{"name": "runs", "value": 2}]
    votes = query_sql(paths["knowledge"], "SELECT upvotes FROM note_state")
    assert votes == [{"upvotes": 1}]
    ask = LedgerQueryTool(config, store, projections=paths)
    answer = ask(ledger="repos", where={"payload.key": {"eq": "org/app"}})
    assert answer["untrusted_data"] is True and len(answer["records"]) == 1

    (record,) = store.read("repos").records
    checks = verify_refs([record_ref(record)], LedgerResolver(store, config))
    assert checks[0].state is RefState.INTACT


def test_example_runs_as_a_new_user_would(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "typed_ledger.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "compaction: ready" in done.stdout
    assert ": intact" in done.stdout
    assert list(tmp_path.iterdir()) == []  # it cleans up after itself
