"""``Explanation``: one action of a chain, read backward into a readable account.

>>> from ledger.chain import assemble_chain
>>> from ledger.model import Event
>>> chain = assemble_chain([
...     Event(kind="request", run_id="r1", args='"tidy the notes"', time="2026-11-30T14:00:00Z"),
...     Event(kind="action", run_id="r1", call_id="c1", tool="write_file",
...           args={"path": "notes.txt"}, verdict="allowed", reason="policy allow-list",
...           refs=[{"source": "memory", "id": "m1", "hash": "sha256:ab12"}]),
...     Event(kind="tool_result", run_id="r1", call_id="c1", tool="write_file",
...           result='"ok"', duration_ms=3),
... ])
>>> print(chain.why("c1"))  # doctest: +ELLIPSIS
write_file (call c1) in run r1: allowed
  reason:   policy allow-list
  args:     {"path":"notes.txt"}
  outcome:  succeeded in 3 ms: "ok"
  evidence: memory m1 sha256:ab12
  request:  "tidy the notes" (event ..., 2026-11-30T14:00:00Z)
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any

from ledger.chain.parts import Action, Anomaly
from ledger.model.codec import approval_dict
from ledger.model.erasure import erased_text, request_shown
from ledger.model.event import Event
from ledger.model.shown import one_line
from ledger.model.values import Approval, Ref
from ledger.timefmt import format_time, format_time_us

__all__ = ["Explanation", "clip", "erased_parts", "gate_text"]

_CLIP = 200
_INDENT = " " * 12  # under the values: "  reason:   "


def clip(text: str | None, limit: int = _CLIP) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when it was cut
    (``None`` reads as empty): how every listing of a chain shortens a value."""
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def erased_parts(
    intent: Event, result: Event | None, request: Event | None = None
) -> dict[str, Any]:
    """``{"erased": {"intent": {...}, "result": {...}, "request": {...}}}`` for the parts
    that were erased (the fields removed and why), else nothing: a machine reader tells
    an erased part from a missing one.

    >>> erased_parts(Event(kind="action", run_id="r", call_id="c"), None)
    {}
    """
    parts = {
        name: e.erased.to_dict()
        for name, e in (("intent", intent), ("result", result), ("request", request))
        if e is not None and e.erased is not None
    }
    return {"erased": parts} if parts else {}


def gate_text(decision: Event) -> str:
    """``verdict: reason (policy label)`` of a gate decision, its erased parts shown as
    erased (what ``ledger why`` prints on its ``gate:`` line).

    >>> gate_text(Event(kind="gate_decision", run_id="r", call_id="c", verdict="denied",
    ...                 reason="dangerous shell command", label="shell"))
    'denied: dangerous shell command (policy shell)'
    """
    reason = erased_text(decision, "reason") or decision.reason
    label = erased_text(decision, "label") or decision.label
    return f"{decision.verdict or '?'}: {reason}" + (f" (policy {label})" if label else "")


def _field(label: str, text: str, width: int | None) -> list[str]:
    """``  label:   text``, whole; wrapped under the value column when ``width`` is given
    (no character is dropped but the spaces where a line breaks)."""
    head = f"  {label + ':':<10}"
    if width is None:
        return [head + text]
    return textwrap.wrap(
        text,
        width=max(width, len(head) + 20),
        initial_indent=head,
        subsequent_indent=_INDENT,
        break_on_hyphens=False,
    ) or [head.rstrip()]


def _ref_line(ref: Ref, request_id: str) -> str:
    if ref.id and ref.id == request_id:
        return f"{ref.source} {ref.id} (the run's request)"
    return f"{ref.source} {ref.id}" + (f" {ref.hash}" if ref.hash else " (no hash captured)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """Why one action happened (or was refused): its intent, verdict and reason, the
    evidence it rested on, the gate's decision, and the request that started the run."""

    action: Action
    request: Event | None
    decision: Event | None = None
    anomalies: tuple[Anomaly, ...] = ()
    cited: tuple[Event, ...] = ()  # the results in the run its evidence cites

    @property
    def tool(self) -> str:
        return self.action.intent.tool

    @property
    def reason(self) -> str:
        return self.action.intent.reason

    @property
    def evidence(self) -> tuple[Ref, ...]:
        return self.action.evidence

    @property
    def approval(self) -> Approval | None:
        """Who approved the call (on its action, else on its gate decision)."""
        if self.action.intent.approval is not None:
            return self.action.intent.approval
        return self.decision.approval if self.decision is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Machine form with stable field names: what ``ledger why --json`` prints;
        ``args``, ``result`` and the request's ``args`` as the JSON values they hold."""
        intent, result = self.action.intent, self.action.result
        approval = self.approval
        return {
            "run_id": intent.run_id,
            "call_id": intent.call_id,
            "tool": intent.tool,
            "principal": intent.principal,
            "args": _value(intent.args),
            "verdict": str(intent.verdict) if intent.verdict else None,
            "reason": intent.reason,
            "outcome": self.action.outcome,
            "approval": approval_dict(approval) if approval is not None else None,
            "result": _value(result.result) if result else None,
            "err": result.err if result else "",
            "duration_ms": result.duration_ms if result and result.duration_ms else None,
            "evidence": [
                {**r.to_dict(), **({"erased": gone} if (gone := self._gone(r)) else {})}
                for r in self.evidence
            ],
            "decision": (
                {
                    "verdict": str(self.decision.verdict or ""),
                    "reason": self.decision.reason,
                    **({"erased": d.to_dict()} if (d := self.decision.erased) else {}),
                }
                if self.decision
                else None
            ),
            "request": (
                {
                    "event_id": str(self.request.event_id),
                    "args": _value(self.request.args),
                    "time": format_time_us(self.request.time),
                }
                if self.request
                else None
            ),
            "anomalies": [str(a) for a in self.anomalies],
            **erased_parts(intent, result, self.request),
        }

    def _evidence_lines(self) -> list[str]:
        request_id = str(self.request.event_id) if self.request is not None else ""
        lines = [
            _ref_line(r, request_id) + (f" {gone}" if (gone := self._gone(r)) else "")
            for r in self.evidence
        ]
        return lines or [erased_text(self.action.intent, "refs") or "(none)"]

    def _gone(self, ref: Ref) -> str:
        """``[erased: <reason>]`` when the result ``ref`` cites was erased since."""
        found = next((e for e in self.cited if str(e.event_id) == ref.id), None)
        return erased_text(found, "result")

    def _outcome(self) -> str:
        result, outcome = self.action.result, self.action.outcome
        if outcome == "denied":
            return "denied: the tool did not run"
        if result is None:
            return "no result recorded (crashed, still running, or the outcome write failed)"
        ms = result.duration_ms  # 0: not measured (a measured one is at least 1 ms)
        timing = f" in {ms} ms" if ms else " (no duration recorded)"
        if outcome == "failed":
            return f"failed{timing}: {erased_text(result, 'err') or clip(result.err)}"
        if outcome == "erased":  # whether it failed went with the erased err
            return f"ran{timing}; its outcome was {erased_text(result, 'err')}"
        return f"succeeded{timing}: {erased_text(result, 'result') or clip(result.result or '')}"

    def _request_text(self) -> str:
        req = self.request
        if req is None:
            return ""
        return request_shown(req)

    def render(self, width: int | None = None) -> str:
        """The readable account. The reason and the gate's reason are shown whole,
        wrapped to ``width`` when given; args, result and request are cut at 200
        characters (``to_dict()`` has all of them). Each line is one line: a line break
        or a control character in recorded text is shown escaped
        (:func:`~ledger.model.shown.one_line`)."""
        intent = self.action.intent
        verdict = str(intent.verdict) if intent.verdict else "no verdict"
        lines = [
            f"{intent.tool or '?'} (call {intent.call_id or '?'}) in run "
            f"{intent.run_id or '?'}: {verdict}",
            *_field(
                "reason", erased_text(intent, "reason") or intent.reason or "(none recorded)", width
            ),
            f"  args:     {clip(erased_text(intent, 'args') or intent.args or '(none)')}",
            f"  outcome:  {self._outcome()}",
        ]
        if self.decision is not None:
            lines += _field("gate", gate_text(self.decision), width)
        if self.approval is not None:
            a = self.approval
            when = f" at {format_time(a.time)}" if a.time else ""
            lines += _field(
                "approved", f"by {a.approver}{when}" + (f": {a.reason}" if a.reason else ""), width
            )
        elif gone := erased_text(intent, "approval") or erased_text(self.decision, "approval"):
            lines += _field("approved", gone, width)
        if intent.principal:
            lines += _field("for", intent.principal, width)
        elif gone := erased_text(intent, "actor"):
            lines += _field("for", gone, width)
        evidence = self._evidence_lines()
        lines.append(f"  evidence: {evidence[0]}")
        lines.extend(f"{_INDENT}{line}" for line in evidence[1:])
        if self.request is None:
            lines.append("  request:  (missing: the run's head was not recorded)")
        else:
            lines.append(
                f"  request:  {clip(self._request_text())} "
                f"(event {self.request.event_id}, {format_time(self.request.time)})"
            )
        lines.extend(f"  anomaly:  {a}" for a in self.anomalies)
        return "\n".join(map(one_line, lines))  # recorded text cannot start a line

    def __str__(self) -> str:
        return self.render()


def _value(text: str | None) -> Any:
    """A stored raw-JSON text as the value it encodes (text that does not parse, which
    the model never stores, stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
