"""Typed ledgers end to end: agent tool calls → queue → artifact → persist → projection → query.

Run it from the repository root::

    python examples/typed_ledger.py

Everything happens in a temporary directory that is removed afterwards. The script plays
both sides: an "agent" calling the ledger tools (whose answers only confirm that an
intent was queued), and the trusted step that persists the run's transaction later,
builds the read-only SQLite projections and queries them.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from ledger.drift import verify_refs
from ledger.typed.compaction.apply import apply_compaction, plan_compaction
from ledger.typed.config import parse_config
from ledger.typed.intents import IntentQueue
from ledger.typed.persist import persist
from ledger.typed.projection import build_projection
from ledger.typed.query import LedgerQueryTool, query_sql
from ledger.typed.resolver import LedgerResolver, record_ref
from ledger.typed.store import ShardStore
from ledger.typed.tools import tool_definitions
from ledger.typed.transactions import read_artifact, write_artifact

CONFIG = """
findings:
  type: table
  key: id
  schema:
    type: object
    required: [id, severity]
    properties:
      id: {type: string}
      severity: {type: string, enum: [low, medium, high]}
knowledge:
  type: notes
  compaction: {min-segments: 2, max-segments: 8}
"""


def agent_run(queue: IntentQueue) -> None:
    """What an agent does: call tools; each answer is only 'queued' (or an error)."""
    append = queue.tool("ledger_append")
    add_note = queue.tool("ledger_note_add")
    vote = queue.tool("ledger_note_vote")
    calls = [
        append(ledger="findings", operation="insert", value={"id": "F-1", "severity": "high"}),
        append(ledger="findings", operation="insert", value={"id": "F-2", "severity": "urgent"}),
        add_note(
            subject="retry policy",
            note="HTTP calls retry three times with backoff",
            reason="Read the client code",
            citations=[{"type": "repository", "path": "src/http.py", "start_line": 10}],
            temp_id="retry",
        ),
        vote(note_id="#retry", vote="up", reason="Checked src/http.py"),
    ]
    for answer in calls:
        print("  agent got:", json.dumps(answer))


def main() -> None:
    config = parse_config(CONFIG)
    print("Tools offered:", ", ".join(tool.name for tool in tool_definitions(config)))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = ShardStore(root / "store", config)

        print("1. The agent calls the ledger tools:")
        queue = IntentQueue(config)
        agent_run(queue)

        print("2. The run ends; its queue becomes the transaction artifact.")
        artifact_path = write_artifact(root / "ledger-transactions.json", queue.artifact("42:1"))

        print("3. The trusted step persists it (values are never echoed):")
        result = persist(config, store, read_artifact(artifact_path))
        for name, entry in result["ledgers"].items():
            print(f"  {name}: {entry['persisted']} persisted, type {entry['type']}")

        print("4. A second run votes too; then maintenance compacts the notes ledger.")
        second = IntentQueue(config)
        note_id = result["ledgers"]["knowledge"]["transactions"][0]["id"]
        second.submit("ledger_note_vote", {"note_id": note_id, "vote": "up"})
        persist(config, store, second.artifact("43:1"))
        plan = plan_compaction(config, store, "knowledge")
        outcome = apply_compaction(config, store, plan) if plan else None
        print("  compaction:", outcome.status if outcome else "nothing to do")

        print("5. Projections are built and queried read-only:")
        paths = build_projection(config, store, root / "projections")
        rows = query_sql(
            paths["knowledge"],
            "SELECT n.subject, s.net_votes FROM notes n JOIN note_state s ON s.note_id = n.id",
        )
        print("  notes:", rows)
        print("  findings:", query_sql(paths["findings"], "SELECT key, value FROM state"))
        ask = LedgerQueryTool(config, store, projections=paths)
        answer = ask(ledger="findings", where={"payload.value.severity": {"eq": "high"}})
        print(
            f"  ledger_query: {len(answer['records'])} record(s); untrusted_data =",
            answer["untrusted_data"],
        )

        print("6. A record cited as evidence verifies against the store:")
        record = store.read("knowledge").records[0]
        checks = verify_refs([record_ref(record)], LedgerResolver(store, config))
        print(f"  {record.id}: {checks[0].state}")


if __name__ == "__main__":
    main()
