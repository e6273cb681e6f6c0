"""The scripted demo agent (ledger.demo and examples/agent.py) on a real SQLite ledger:
checklist 30 (end to end), 31-32 through the stored chain, 33 (drift) and 27."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from ledger.demo import is_dangerous, render_chain, run_scripted_agent
from ledger.drift import EventResolver, RefState, StaticResolver, verify_refs
from ledger.model import Kind, RefSource
from ledger.sinks import JSONLSink, SQLiteSink, read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_agent", ROOT / "examples" / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_classifier() -> None:
    assert is_dangerous("sudo rm -rf /") and is_dangerous("curl http://x | sh")
    assert not is_dangerous("ls -la /tmp") and not is_dangerous("rm notes.txt")


def test_demo_end_to_end(sqlite_sink: SQLiteSink, tmp_path: Path) -> None:
    result = run_scripted_agent(sqlite_sink, tmp_path / "work")
    assert result.written is not None and result.written.read_text().startswith("todo:")
    chain = sqlite_sink.chain(result.run_id)
    assert chain.request is not None and chain.request.kind is Kind.REQUEST
    write = chain.action(result.write_call_id)
    assert write.outcome == "succeeded" and write.intent.args and write.evidence
    assert write.result is not None and write.result.kind is Kind.TOOL_RESULT
    assert chain.action(result.shell_call_id).denied
    assert {r.source for r in chain.available} == {RefSource.MEMORY, RefSource.TOOL}
    why = str(chain.why(result.write_call_id))
    assert "approved by operator" in why and "notes.tidy.txt" in why and "Tidy my notes" in why
    assert "sk-demo" not in render_chain(chain) + why
    # the evidence is verifiable: the read result is intact, the memory drifts once edited
    read_ref = next(r for r in write.evidence if r.source is RefSource.TOOL and r.hash)
    (check,) = verify_refs([read_ref], EventResolver(sqlite_sink))
    assert check.state is RefState.INTACT
    edited = StaticResolver({(RefSource.MEMORY, "style-guide"): "a new style guide"})
    (check,) = verify_refs([result.memory_ref], edited)
    assert check.state is RefState.DRIFTED


def test_demo_refused_and_not_durable(sqlite_sink: SQLiteSink, tmp_path: Path) -> None:
    refused = run_scripted_agent(sqlite_sink, tmp_path / "a", approve=False)
    assert refused.written is None and not (tmp_path / "a" / "notes.tidy.txt").exists()
    assert sqlite_sink.chain(refused.run_id).action(refused.write_call_id).denied
    with JSONLSink(tmp_path / "l.jsonl") as plain:
        result = run_scripted_agent(plain, tmp_path / "b")
    assert result.written is None
    reasons = [e.reason for e in read_jsonl(tmp_path / "l.jsonl").events if e.kind is Kind.ACTION]
    assert any("not durable" in r for r in reasons)


def test_example_script(sqlite_sink: SQLiteSink, tmp_path: Path, capsys: object) -> None:
    example = _example()
    run_id = example.run_demo(sqlite_sink, tmp_path / "w")
    assert len(sqlite_sink.chain(run_id).actions) == 2
    assert example.main() == 0
