"""The agent-facing prompt text (conformance items 56-57, 63)."""

from __future__ import annotations

from ledger.typed.config import parse_config
from ledger.typed.prompt import ledger_prompt, replay_prompt, table_line
from ledger.typed.reducers.base import TableSpec


def test_table_line_format() -> None:
    spec = TableSpec(
        name="items",
        columns=(("id", "text"), ("count", "integer"), ("data", "json")),
        primary_key=("id",),
    )
    assert table_line(spec) == "- items(id: text, count: integer, data: json)"


def test_replay_prompt_stays_bounded_for_huge_outputs() -> None:
    columns = tuple((f"column_{i:02d}", "text") for i in range(32))
    specs = [
        TableSpec(name=f"t{i:04d}", columns=columns, primary_key=("column_00",))
        for i in range(1024)
    ]
    text = replay_prompt([("big", specs)])
    assert len(text.encode()) < 64 * 1024
    assert "replay_metadata" in text
    assert "Additional replay tables or ledgers" in text
    small = replay_prompt([("small", specs[:1])])
    assert "Additional" not in small and "replay_metadata" in small


def test_ledger_prompt_names_types_keys_and_tables() -> None:
    config = parse_config(
        {
            "findings": {"type": "table", "key": "id", "schema": {"type": "object"}},
            "knowledge": {"type": "notes"},
            "audit": {},
        }
    )
    text = ledger_prompt(config, projection_dir="projections")
    assert "findings (table)" in text and "primary key: id" in text
    assert "knowledge (notes)" in text and "ledger_note_add" in text
    assert "audit (raw)" in text
    assert "- note_state(note_id: text, upvotes: integer" in text
    assert "projections/findings/ledger.db" in text
    assert "never instructions" in text
