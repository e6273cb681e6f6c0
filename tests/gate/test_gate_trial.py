"""Findings of a new user's trial of the gate, each pinned by a test: denied attempts keep
their args, ``AllowList`` conditions always apply, previews keep the text after a masked
value, ``ToolDenied.reason`` is the why alone, safe reads under an approver carry its
name, the examples' README matches what runs, and the benchmark's exit status."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger import AllowAll, Decision, Gate, Kind, ToolCall, ToolDenied, Verdict
from ledger.demo import run_scripted_agent
from ledger.gate import AllowList, Approver
from ledger.model import Event
from ledger.sinks import SQLiteSink

ROOT = Path(__file__).resolve().parents[2]


def _actions(sink: SQLiteSink, run_id: str, call_id: str) -> list[Event]:
    return [e for e in sink.events(run_id=run_id, kind=Kind.ACTION) if e.call_id == call_id]


# 1. A denial records the attempted (redacted) arguments.


def test_a_reused_call_id_records_the_arguments_of_the_denied_attempt(
    sqlite_sink: SQLiteSink,
) -> None:
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        run.call("write", {"path": "a"}, lambda path: 1, call_id="cid1")
        with pytest.raises(ToolDenied, match="already used"):
            run.call("write", {"path": "b", "api_key": "k-secret-1"}, lambda **_: 2, call_id="cid1")
    first, second = _actions(sqlite_sink, run.run_id, "cid1")
    assert first.verdict is Verdict.ALLOWED and first.args == '{"path":"a"}'
    assert second.verdict is Verdict.DENIED
    assert second.args == '{"path":"b","api_key":"[REDACTED]"}'
    assert second.preview == 'write {"path":"b","api_key":"[REDACTED]"}'


def test_an_async_function_given_to_call_records_the_attempted_arguments(
    sqlite_sink: SQLiteSink,
) -> None:
    async def send(to: str) -> str:
        return to

    with (
        Gate(sqlite_sink, policy=AllowAll()).run("x") as run,
        pytest.raises(ToolDenied, match="call it with acall"),
    ):
        run.call("send", {"to": "sam@example.com"}, send, call_id="c1")  # type: ignore[unused-coroutine]
    (denied,) = _actions(sqlite_sink, run.run_id, "c1")
    assert denied.verdict is Verdict.DENIED and denied.args == '{"to":"sam@example.com"}'


def test_other_early_denials_record_the_attempted_arguments(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    run = gate.run("x")  # never entered
    with pytest.raises(ToolDenied, match="was not entered"):
        run.call("write", {"p": 1}, lambda p: p, call_id="c1")
    with gate.run("y") as run2, pytest.raises(ToolDenied, match="not callable"):
        run2.call("write", {"p": 2}, "not a function", call_id="c2")  # type: ignore[arg-type]
    assert _actions(sqlite_sink, run.run_id, "c1")[0].args == '{"p":1}'
    assert _actions(sqlite_sink, run2.run_id, "c2")[0].args == '{"p":2}'


def test_a_tool_called_outside_a_run_records_redacted_arguments(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    @gate.tool()
    def write(path: str, token: str) -> None: ...

    with pytest.raises(ToolDenied) as denied:
        write(path="a", token="t-123")
    assert denied.value.reason == "no active run (no record, no action)"
    (event,) = [e for e in sqlite_sink.events(kind=Kind.ACTION) if e.run_id.startswith("norun-")]
    assert event.args == '{"path":"a","token":"[REDACTED]"}'


# 2. An AllowList condition applies even to a name also listed in tools.


def test_allow_list_condition_applies_to_a_listed_name(sqlite_sink: SQLiteSink) -> None:
    policy = AllowList(["w"], when={"w": lambda a: str(a["path"]).startswith("/tmp/")})
    ran: list[str] = []
    with Gate(sqlite_sink, policy=policy).run("x") as run:
        with pytest.raises(ToolDenied, match="do not satisfy its allow-list condition"):
            run.call("w", {"path": "/etc/a"}, ran.append)
        run.call("w", {"path": "/tmp/a"}, lambda path: ran.append(path))
    assert ran == ["/tmp/a"]
    assert AllowList(["other"]).tools == frozenset({"other"})  # a plain listing still works
    with Gate(sqlite_sink, policy=AllowList(["other"])).run("x") as run:
        assert run.call("other", {"any": 1}, lambda any: any) == 1


# 3. Args that are not JSON: see test_gate_hostile (denied, placeholders recorded).


def test_the_trial_object_arg_is_denied_and_its_record_is_json(sqlite_sink: SQLiteSink) -> None:
    ran: list[object] = []
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run, pytest.raises(ToolDenied) as denied:
        run.call("write", {"p": object()}, ran.append, call_id="c1")
    assert ran == []
    assert denied.value.reason.startswith("argument 'p' is not JSON (object)")
    (event,) = _actions(sqlite_sink, run.run_id, "c1")
    assert event.args == '{"p":"[not JSON: object]"}' and "object at 0x" not in event.to_json()


# 4. The preview keeps the text after a masked value.


def test_preview_keeps_the_word_after_a_masked_value(sqlite_sink: SQLiteSink) -> None:
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        run.call("note", {"text": "api_key=SECRET123\nnext line"}, lambda text: 1, call_id="c1")
    (action,) = _actions(sqlite_sink, run.run_id, "c1")
    assert action.args == '{"text":"api_key=[REDACTED]\\nnext line"}'
    assert action.preview == 'note {"text":"api_key=[REDACTED]\\nnext line"}'
    assert "SECRET123" not in action.to_json()


def test_the_demo_write_preview_keeps_call_sam(sqlite_sink: SQLiteSink, tmp_path: Path) -> None:
    result = run_scripted_agent(sqlite_sink, tmp_path / "work")
    (write,) = _actions(sqlite_sink, result.run_id, result.write_call_id)
    assert "api_key=[REDACTED]\\ncall Sam" in write.preview
    assert "sk-demo" not in write.preview and "call Sam" in (write.args or "")


# 5. ToolDenied.reason is the why alone.


def test_tool_denied_reason_is_the_why_alone(sqlite_sink: SQLiteSink) -> None:
    with Gate(sqlite_sink).run("x") as run, pytest.raises(ToolDenied) as denied:
        run.call("write", {"a": 1}, lambda a: a, call_id="c1")
    exc = denied.value
    why = "non-safe tool 'write' needs approval; no approver answered (fail-closed)"
    assert exc.reason == why
    assert str(exc) == f'action "write" denied: {why}'
    assert exc.tool == "write" and exc.call_id == "c1"
    (event,) = _actions(sqlite_sink, run.run_id, "c1")
    assert event.reason == exc.reason  # the caller is told what the ledger records


def test_tool_denied_reason_from_acall(sqlite_sink: SQLiteSink) -> None:
    async def main() -> ToolDenied:
        async with Gate(sqlite_sink, policy=AllowList()).run("x") as run:
            with pytest.raises(ToolDenied) as denied:
                await run.acall("w", {}, lambda: None, call_id="c1")
        return denied.value

    exc = asyncio.run(main())
    assert exc.call_id == "c1" and exc.reason == "'w' is not on the allow-list"
    assert str(exc) == """action "w" denied: 'w' is not on the allow-list"""


# 7. Safe decisions under an Approver are labelled with the approver's name.


def test_safe_decision_label_under_an_approver(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=Approver(lambda c: True, name="ops"), safe_tools={"read"})
    with gate.run("x") as run:
        run.call("read", {"p": "a"}, lambda p: "text", call_id="r1")
        run.call("write", {"p": "a"}, lambda p: 1, call_id="w1")
    labels = {
        e.call_id: e.label for e in sqlite_sink.events(run_id=run.run_id, kind=Kind.GATE_DECISION)
    }
    assert labels == {"r1": "safe:ops", "w1": "ops"}


# 6. The examples' README matches what the example prints, and its snippet runs.


def test_readme_describes_the_printed_order_and_its_snippet_runs(tmp_path: Path) -> None:
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    assert "shows its `action` first" not in readme and "examples.agent" not in readme
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    write_rows = [row.split()[0] for row in out.splitlines() if " write_file " in row]
    assert write_rows == ["gate_decision", "action", "tool_result"]
    assert "Every call starts with its `gate_decision`" in readme
    snippet = re.search(r"From code.*?```python\n(.*?)```", readme, re.DOTALL)
    assert snippet is not None and "ledger.demo import" in snippet.group(1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", snippet.group(1)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # outside the repository: only the installed library is importable
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert "write_file" in run.stdout and "approved by operator" in run.stdout
    assert (tmp_path / "work" / "notes.tidy.txt").exists()


# 8. The benchmark names what each ratio compares, and fails with status 1 over the bar.


@pytest.mark.parametrize(("limit", "status"), [("100", 0), ("0.01", 1)])
def test_benchmark_exit_status(tmp_path: Path, limit: str, status: int) -> None:
    args: list[Any] = [sys.executable, str(ROOT / "benchmarks" / "gate.py")]
    args += ["--part", "calls", "--calls", "2", "--rounds", "4", "--dir", str(tmp_path)]
    args += ["--limit", limit]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == status, done.stderr
    assert "median/median" in done.stdout and "paired" in done.stdout
    assert ("TOO SLOW" in done.stdout) == (status == 1)


def test_a_policy_that_puts_a_non_json_value_into_nested_args_denies(
    sqlite_sink: SQLiteSink,
) -> None:
    class Meddler:
        def decide(self, call: ToolCall) -> Decision:
            call.args["opts"]["when"] = object()  # the view is read-only at the top only
            return Decision("allowed", "ok", "meddler")

    ran: list[Any] = []
    with Gate(sqlite_sink, policy=Meddler()).run("x") as run, pytest.raises(ToolDenied) as denied:
        run.call("w", {"opts": {}}, lambda opts: ran.append(opts), call_id="c1")
    assert ran == [] and denied.value.reason.startswith(
        "argument 'opts' is not JSON (object at ['opts']['when'])"
    )
    (event,) = _actions(sqlite_sink, run.run_id, "c1")
    assert event.args == '{"opts":{"when":"[not JSON: object]"}}'
