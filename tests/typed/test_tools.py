"""Tool definitions and the intent queue (reference §7.1; conformance items 65-66)."""

from __future__ import annotations

import threading
from typing import Any

import jsonschema_rs
import pytest

from ledger.typed.config import LedgerConfig, parse_config
from ledger.typed.intents import IntentQueue
from ledger.typed.jsontext import final_id
from ledger.typed.tools import mcp_tools, openai_tools, tool_definitions

CITATION = {"type": "repository", "path": "README.md"}


def names(config: LedgerConfig) -> list[str]:
    return [tool.name for tool in tool_definitions(config)]


def schema_of(config: LedgerConfig, name: str) -> dict[str, Any]:
    return {t.name: dict(t.input_schema) for t in tool_definitions(config)}[name]


def test_only_map_and_notes_ledgers_offer_no_ledger_append() -> None:
    config = parse_config({"repos": {"type": "map"}, "knowledge": {"type": "notes"}})
    assert names(config) == [
        "ledger_map_put",
        "ledger_map_delete",
        "ledger_note_add",
        "ledger_note_vote",
        "ledger_query",
    ]


def test_a_log_ledger_adds_ledger_append() -> None:
    config = parse_config({"repos": {"type": "map"}, "history": {"type": "log"}})
    assert names(config)[0] == "ledger_append"
    schema = schema_of(config, "ledger_append")
    assert schema["properties"]["ledger"]["enum"] == ["history"]
    assert "ledger" not in schema["required"]


@pytest.mark.parametrize("kind", [None, "log", "set", "table", "counter"])
def test_every_appendable_type_offers_ledger_append(kind: str | None) -> None:
    definition: dict[str, Any] = {"type": kind} if kind else {"schema": {"type": "object"}}
    if kind == "table":
        definition["key"] = "id"
    config = parse_config({"one": definition})
    assert "ledger_append" in names(config)


def test_notes_tool_schemas_follow_the_reference() -> None:
    config = parse_config({"a": {"type": "notes"}, "b": {"type": "notes"}})
    add = schema_of(config, "ledger_note_add")
    assert add["properties"]["ledger"]["enum"] == ["a", "b"]
    assert add["required"] == ["ledger", "subject", "note", "reason", "citations"]
    assert add["properties"]["reason"]["maxLength"] == 1024
    assert add["properties"]["subject"]["maxLength"] == 512
    citations = add["properties"]["citations"]
    assert (citations["minItems"], citations["maxItems"]) == (1, 32)
    assert citations["items"]["required"] == ["type", "path"]
    assert citations["items"]["additionalProperties"] is False
    assert "temp_id" in add["properties"]
    vote = schema_of(config, "ledger_note_vote")
    assert vote["properties"]["vote"]["enum"] == ["up", "down"]
    assert "reason" not in vote["required"]
    assert vote["properties"]["reason"]["maxLength"] == 1024


def test_one_notes_ledger_does_not_require_ledger() -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    assert schema_of(config, "ledger_note_add")["required"] == [
        "subject",
        "note",
        "reason",
        "citations",
    ]


def test_every_schema_compiles_and_exports_in_framework_shapes() -> None:
    config = parse_config(
        {"h": {"type": "log"}, "r": {"schema": {"type": "object"}}, "m": {"type": "map"}}
    )
    for tool in tool_definitions(config):
        jsonschema_rs.validator_for(dict(tool.input_schema))
    mcp = mcp_tools(config)
    assert {"name", "description", "inputSchema"} == set(mcp[0])
    openai = openai_tools(config)
    assert openai[0]["type"] == "function"
    assert set(openai[0]["function"]) == {"name", "description", "parameters"}
    assert "queued" in openai[0]["function"]["description"]


def test_submit_answers_only_queued() -> None:
    config = parse_config({"history": {"type": "log"}})
    queue = IntentQueue(config)
    answer = queue.submit("ledger_append", {"operation": "append", "value": "x"})
    assert answer == {"success": True, "queued": True}
    assert queue.requests == ({"ledger": "history", "operation": "append", "value": "x"},)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("ledger_append", {"operation": "append"}, "Invalid ledger operation fields"),
        ("ledger_append", {"operation": "push", "value": 1}, "operation"),
        ("ledger_append", {"operation": "append", "value": 1, "parents": []}, "parents"),
        ("ledger_append", {"record": {"a": 1}}, "record"),
        ("ledger_append", ["not", "an", "object"], "expected an object"),
        ("ledger_unknown", {}, "Unknown ledger tool"),
        ("ledger_query", {}, "not queued"),
        ("ledger_append", {"operation": "append", "value": 1, "temp_id": "../x"}, "temp_id"),
    ],
)
def test_submit_refuses_bad_calls_with_a_clear_error(
    tool: str, arguments: Any, message: str
) -> None:
    queue = IntentQueue(parse_config({"history": {"type": "log"}}))
    answer = queue.submit(tool, arguments)
    assert answer["success"] is False and answer["queued"] is False
    assert message in answer["error"]
    assert len(queue) == 0


def test_dedicated_tools_become_operations() -> None:
    config = parse_config({"repos": {"type": "map"}, "knowledge": {"type": "notes"}})
    queue = IntentQueue(config)
    tools = queue.functions()
    assert tools["ledger_map_put"](key="a", value={"x": 1})["queued"]
    assert tools["ledger_map_delete"](key="a")["queued"]
    note = {"subject": "S", "note": "N", "reason": "R", "citations": [CITATION], "temp_id": "n1"}
    assert tools["ledger_note_add"](**note)["queued"]
    assert tools["ledger_note_vote"](note_id="#n1", vote="down", reason="wrong")["queued"]
    operations = [(r["ledger"], r["operation"]) for r in queue.requests]
    assert operations == [
        ("repos", "put"),
        ("repos", "delete"),
        ("knowledge", "note"),
        ("knowledge", "vote"),
    ]
    artifact = queue.artifact("run:1")
    vote = artifact["ledgers"]["knowledge"]["appends"][1]["record"]
    assert vote["note_id"] == final_id("run:1", 2)


def test_tool_function_is_named_and_documented() -> None:
    queue = IntentQueue(parse_config({"repos": {"type": "map"}}))
    put = queue.tool("ledger_map_put")
    assert put.__name__ == "ledger_map_put"
    assert put.__doc__ and "queued" in put.__doc__


def test_note_bounds_are_checked_beyond_the_schema() -> None:
    queue = IntentQueue(parse_config({"knowledge": {"type": "notes"}}))
    subject = "é" * 300  # 300 code points pass maxLength 512, but 600 bytes do not
    answer = queue.submit(
        "ledger_note_add",
        {"subject": subject, "note": "n", "reason": "r", "citations": [CITATION]},
    )
    assert answer["success"] is False and "bounded" in answer["error"]
    bad_path = {"type": "repository", "path": "../etc/passwd"}
    answer = queue.submit(
        "ledger_note_add", {"subject": "s", "note": "n", "reason": "r", "citations": [bad_path]}
    )
    assert answer["success"] is False and "citation" in answer["error"]


def test_queue_holds_at_most_100_requests() -> None:
    queue = IntentQueue(parse_config({"metrics": {"type": "counter"}}))
    call = queue.tool("ledger_append")
    for _ in range(100):
        assert call(operation="increment", name="a", amount=1)["queued"]
    answer = call(operation="increment", name="a", amount=1)
    assert answer["success"] is False and "at most 100" in answer["error"]


def test_duplicate_temp_id_is_refused_at_submit() -> None:
    queue = IntentQueue(parse_config({"history": {"type": "log"}}))
    assert queue.submit("ledger_append", {"operation": "append", "value": 1, "temp_id": "a"})[
        "queued"
    ]
    answer = queue.submit("ledger_append", {"operation": "append", "value": 2, "temp_id": "#a"})
    assert "duplicate temporary ID" in answer["error"]


def test_deeply_nested_arguments_are_refused() -> None:
    queue = IntentQueue(parse_config({"history": {"type": "log"}}))
    value: Any = "x"
    for _ in range(40):
        value = [value]
    answer = queue.submit("ledger_append", {"operation": "append", "value": value})
    assert answer["success"] is False and "nesting depth" in answer["error"]


def test_submit_is_thread_safe() -> None:
    queue = IntentQueue(parse_config({"history": {"type": "log"}}))

    def worker(n: int) -> None:
        for i in range(10):
            queue.submit("ledger_append", {"operation": "append", "value": n * 10 + i})

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r["value"] for r in queue.requests) == list(range(50))


@pytest.mark.parametrize("module", ["tools", "intents", "transactions", "prompt", "limits"])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"ledger.typed.{module}"))
    assert result.failed == 0 and result.attempted > 0


def test_anthropic_shape() -> None:
    (tool, *_) = tool_definitions(parse_config({"history": {"type": "log"}}))
    assert set(tool.to_anthropic()) == {"name", "description", "input_schema"}
