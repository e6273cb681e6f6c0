"""A scripted agent (no model) that shows the gate at work; ``ledger demo`` runs it.

>>> with SQLiteSink("ledger.db") as sink:                         # doctest: +SKIP
...     result = run_scripted_agent(sink, Path("work"))
...     print(sink.chain(result.run_id).why(result.write_call_id))

The agent is asked to tidy a notes file. In one run it:

1. records the memory it was shown (a style guide) as ``retrieved``, with its hash;
2. reads ``notes.txt`` through the safe tool ``read_file`` (no approval, still recorded;
   the fake API key in the notes is redacted in the ledger);
3. tries ``run_shell("sudo rm -rf /")``, which the policy denies as dangerous: the tool
   never runs and the attempt stays in the ledger as a denied action;
4. writes ``notes.tidy.txt`` through the non-safe ``write_file``, approved by the
   (scripted) operator, after its action was durably committed, citing the read and the
   memory as evidence. With ``approve=False`` the operator refuses and nothing is written.

``run_scripted_agent`` needs a ``DurableSink`` for step 4; with a plain sink the write is
denied ("ledger not durable"), which is the point of the gate.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.drift import content_hash
from ledger.errors import ToolDenied
from ledger.gate.gate import Gate
from ledger.gate.policy import Approver, Decision, DenyNonSafe, ToolCall
from ledger.gate.values import bounded
from ledger.model.values import Ref, RefSource, Verdict

if TYPE_CHECKING:
    from ledger.chain.assemble import Chain
    from ledger.sinks.base import Sink

__all__ = ["DemoResult", "is_dangerous", "render_chain", "run_scripted_agent"]

log = logging.getLogger(__name__)

REQUEST = "Tidy my notes: read notes.txt and write a cleaned copy to notes.tidy.txt."
NOTES = (
    "todo: renew the TLS cert  \n"
    "todo: renew the TLS cert\n"
    "deploy key for staging: api_key=sk-demo-0123456789abcdefghij\n"
    "  call Sam about the Q3 report   \n"
)
STYLE_GUIDE = "Notes: one item per line, no trailing spaces, no duplicates."
DANGEROUS_COMMAND = "sudo rm -rf /"

_DANGER = re.compile(
    r"(?:^|[;&|]\s*)sudo\b|\brm\s+-[a-zA-Z]*[rf][a-zA-Z]*\s+(?:/|~)|\bmkfs\b|\bdd\s+if=|"
    r":\(\)\s*\{|\b(?:curl|wget)\b[^|]*\|\s*(?:ba|z)?sh\b|\bchmod\s+-R\s+777\s+/|>\s*/dev/sd"
)


def is_dangerous(command: str) -> bool:
    """A small shell classifier: ``sudo rm -rf /`` is dangerous, ``ls -la /tmp`` is not."""
    return bool(_DANGER.search(command))


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    """What the scripted run did: its id, the call ids of its three tool calls, and the
    file it wrote (``None`` when the write was refused)."""

    run_id: str
    read_call_id: str
    shell_call_id: str
    write_call_id: str
    written: Path | None
    memory_ref: Ref


class ShellGuard:
    """The demo's policy: dangerous shell commands are denied outright; everything else
    is left to :class:`~ledger.gate_policy.DenyNonSafe` (safe runs, the rest needs
    approval)."""

    def decide(self, call: ToolCall) -> Decision:
        command = str(call.args.get("command", ""))
        if call.tool == "run_shell" and is_dangerous(command):
            return Decision(
                verdict=Verdict.DENIED,
                reason=f"dangerous shell command refused: {command!r}",
                policy_id="shell-guard",
            )
        return DenyNonSafe().decide(call)


def _operator(approve: bool, workdir: Path) -> Approver:
    def answer(call: ToolCall) -> tuple[bool, str]:
        if call.tool != "write_file":
            return False, "the operator only approves file writes in this demo"
        if not approve:
            return False, "the operator declined"
        return True, f"the operator approved writing {call.args.get('path')!r} in the work dir"

    return Approver(answer, policy=ShellGuard(), name="operator")


def _inside(workdir: Path, path: str) -> Path:
    target = (workdir / path).resolve()
    if not target.is_relative_to(workdir.resolve()):
        raise PermissionError(f"{path!r} is outside the work directory")
    return target


def _tidy(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()]
    return "\n".join(dict.fromkeys(line for line in lines if line)) + "\n"


def run_scripted_agent(sink: Sink, workdir: Path, *, approve: bool = True) -> DemoResult:
    """Run the scripted agent once against ``sink`` in ``workdir`` (created, and seeded
    with ``notes.txt`` when it has none); return what it did."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    notes = workdir / "notes.txt"
    if not notes.exists():
        notes.write_text(NOTES, encoding="utf-8")
    gate = Gate(sink, policy=_operator(approve, workdir))

    @gate.tool(safe=True)
    def read_file(path: str) -> str:
        return _inside(workdir, path).read_text(encoding="utf-8")

    @gate.tool()
    def run_shell(command: str) -> str:  # never reached in the demo: the guard denies it
        raise PermissionError("the demo does not execute shell commands")

    def write_file(path: str, text: str) -> int:  # called through run.call, with evidence
        return _inside(workdir, path).write_text(text, encoding="utf-8")

    memory = Ref(source=RefSource.MEMORY, id="style-guide", hash=content_hash(STYLE_GUIDE))
    written: Path | None = None
    with gate.run(REQUEST, agent_path="demo/scripted-agent") as run:
        run.retrieved([memory])
        text = read_file(path="notes.txt")
        read_id = run.last_call_id
        try:
            run_shell(command=DANGEROUS_COMMAND)
        except ToolDenied as denied:
            log.info("demo: shell command denied: %s", denied.reason)
        shell_id = run.last_call_id
        try:
            run.call(
                "write_file",
                {"path": "notes.tidy.txt", "text": _tidy(text)},
                write_file,
                evidence=[run.ref(read_id), memory],
            )
            written = workdir / "notes.tidy.txt"
        except ToolDenied as denied:
            log.info("demo: write denied: %s", denied.reason)
        write_id = run.last_call_id
    return DemoResult(
        run_id=run.run_id,
        read_call_id=read_id,
        shell_call_id=shell_id,
        write_call_id=write_id,
        written=written,
        memory_ref=memory,
    )


def render_chain(chain: Chain, *, width: int = 60) -> str:
    """A readable run log: one aligned line per event (kind, tool, call id, verdict, then
    the reason, preview, error or refs, cut to ``width`` characters), in the order the
    events were stored, then the chain's anomalies."""
    rows: list[tuple[str, str, str, str, str]] = []
    for e in chain.events:
        refs = " ".join(f"{r.source}:{r.id}" for r in e.refs)
        detail = (e.reason or e.preview or e.err or refs).replace("\n", " ")
        verdict = str(e.verdict) if e.verdict else ""
        rows.append((str(e.kind), e.tool, e.call_id, verdict, bounded(detail, width)))
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    lines = [f"run {chain.run_id} ({len(rows)} events, in the order they happened)"]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)]
        lines.append(("  " + "  ".join([*cells, row[4]])).rstrip())
    lines.extend(f"  anomaly: {a}" for a in chain.anomalies)
    return "\n".join(lines)
