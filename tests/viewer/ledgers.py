"""Ledgers for the viewer tests: the scripted agent's run, a run full of hostile values,
denials, failures and anomalies, and many small runs for paging.

Every value a page shows comes from here, so the tests can say exactly what must (and
must not) appear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.demo import run_scripted_agent
from ledger.drift import content_hash
from ledger.model import Event
from ledger.sinks import open_sink

HOSTILE_RUN = '<script>alert("run")</script>\'&"\u202eevil'
HOSTILE_TOOL = '<img src=x onerror=alert("tool")>'
HOSTILE_ARGS = {
    "path": '</pre><script>alert("args")</script>',
    "quote": "\"'&<>",
    "bidi": "a\u202eb",
}
HUGE = "x" * 250_000 + "<script>alert('tail')</script>"
PAGED_RUNS = 130
BASE = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Filled:
    """What a test ledger holds."""

    url: str
    demo_run: str
    demo_write_call: str
    demo_shell_call: str
    hostile_run: str = HOSTILE_RUN
    hostile_denied_call: str = "c-denied"
    hostile_failed_call: str = "c-failed"
    hostile_huge_call: str = "c-huge"
    huge_result_id: str = ""


def hostile_events(run_id: str = HOSTILE_RUN, start: datetime = BASE) -> list[Event]:
    """One run with a denial, a failure, an unanswered action, a result that ran without
    an intent, a huge result, and hostile text in every field a page shows."""
    t = iter(start + timedelta(seconds=i) for i in range(100))
    common = {"run_id": run_id, "agent_path": 'planner/<b>coder</b>"'}
    request = Event(kind="request", args='"please <script>alert(1)</script> tidy"', time=next(t),
                    **common)  # fmt: skip
    read = Event(kind="tool_result", call_id="c-read", tool="read_file", result='"notes"',
                 duration_ms=4, time=next(t), **common)  # fmt: skip
    safe = Event(kind="gate_decision", call_id="c-read", tool="read_file", verdict="allowed",
                 label="safe:ro", reason="safe tool", time=read.time, **common)  # fmt: skip
    refs = [{"source": "tool", "id": str(read.event_id), "hash": content_hash('"notes"')},
            {"source": "memory", "id": "<mem id>", "hash": "sha256:00"}]  # fmt: skip
    denied = Event(kind="action", call_id="c-denied", tool=HOSTILE_TOOL, args=HOSTILE_ARGS,
                   verdict="denied", reason='policy <deny> "rm -rf /"', refs=refs, time=next(t),
                   **common)  # fmt: skip
    failed = Event(kind="action", call_id="c-failed", tool="write_file", args={"path": "a"},
                   verdict="allowed", reason="operator approved", refs=refs, time=next(t),
                   **common)  # fmt: skip
    failed_result = Event(kind="tool_result", call_id="c-failed", tool="write_file",
                          err="PermissionError: <denied> by the OS", duration_ms=12,
                          time=next(t), **common)  # fmt: skip
    huge = Event(kind="action", call_id="c-huge", tool="fetch", args={"url": "http://x"},
                 verdict="allowed", reason="allow-list", refs=refs, time=next(t),
                 **common)  # fmt: skip
    huge_result = Event(kind="tool_result", call_id="c-huge", tool="fetch",
                        result={"body": HUGE}, duration_ms=1500, time=next(t),
                        **common)  # fmt: skip
    open_action = Event(kind="action", call_id="c-open", tool="send_mail", args={"to": "x"},
                        verdict="allowed", reason="allow-list", refs=refs, time=next(t),
                        **common)  # fmt: skip
    rogue = Event(kind="tool_result", call_id="c-rogue", tool="delete_db", result='"gone"',
                  time=next(t), **common)  # fmt: skip
    end = Event(kind="run_end", time=next(t), **common)
    return [request, read, safe, denied, failed, failed_result, huge, huge_result, open_action,
            rogue, end]  # fmt: skip


def paged_events(n: int = PAGED_RUNS, start: datetime = BASE - timedelta(days=2)) -> list[Event]:
    """``n`` small runs, one a minute: run ``page-NNN`` calls tool ``tool-(i % 3)`` as agent
    ``agent-(i % 5)``; every tenth is denied."""
    out: list[Event] = []
    for i in range(n):
        run, when = f"page-{i:03d}", start + timedelta(minutes=i)
        agent = f"agent-{i % 5}"
        out.append(Event(kind="request", run_id=run, args=f'"job number {i}"', time=when,
                         agent_path=agent))  # fmt: skip
        denied = i % 10 == 0
        out.append(Event(kind="action", run_id=run, call_id="c1", tool=f"tool-{i % 3}",
                         args={"i": i}, verdict="denied" if denied else "allowed",
                         reason="no" if denied else "ok", agent_path=agent,
                         refs=[{"source": "memory", "id": f"m{i}"}],
                         time=when + timedelta(seconds=1)))  # fmt: skip
        if not denied:
            out.append(Event(kind="tool_result", run_id=run, call_id="c1", tool=f"tool-{i % 3}",
                             result=f'"done {i}"', agent_path=agent,
                             time=when + timedelta(seconds=2)))  # fmt: skip
    return out


def fill(url: str, workdir: Path, *, paged: int = PAGED_RUNS) -> Filled:
    """The demo run, the hostile run and ``paged`` small runs, into ``url``."""
    with open_sink(url) as sink:
        demo = run_scripted_agent(sink, workdir)
        events = hostile_events() + paged_events(paged)
        for e in events:
            sink.record(e)
    huge = next(e for e in events if e.kind == "tool_result" and e.call_id == "c-huge")
    return Filled(
        url=url,
        demo_run=demo.run_id,
        demo_write_call=demo.write_call_id,
        demo_shell_call=demo.shell_call_id,
        huge_result_id=str(huge.event_id),
    )
