"""``ledger why``'s output: one action explained backward, for people and for machines.

The human form is :class:`~ledger.explain.Explanation`'s, except that the reason and the
gate's reason are shown whole, wrapped to the terminal (``str(explanation)`` cuts them
at 200 characters, which hid the end of an approval). The machine form is
``Explanation.to_dict()`` with ``args``, ``result`` and the request's ``args`` embedded as
JSON values, as ``ledger events --json`` and ``ledger chain --json`` give them.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ledger.explain import Explanation
from ledger.timefmt import format_time

__all__ = ["json_value", "why_dict", "why_text"]

_CLIP = 200  # args, result and request: the whole of them is in --json
_INDENT = " " * 12  # under the values: "  reason:   "


def json_value(text: str | None) -> Any:
    """A stored raw-JSON ``args`` or ``result`` as the value it encodes (``None`` stays
    ``None``; text that does not parse, which the model never stores, stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def why_dict(explanation: Explanation) -> dict[str, Any]:
    """``Explanation.to_dict()`` with ``args``/``result`` as JSON values, not strings."""
    value = explanation.to_dict()
    value["args"] = json_value(value["args"])
    value["result"] = json_value(value["result"])
    if value.get("request"):
        value["request"]["args"] = json_value(value["request"]["args"])
    return value


def _clip(text: str, limit: int = _CLIP) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrapped(label: str, text: str, width: int) -> list[str]:
    """``  label:   text``, wrapped to ``width`` under the value column; no character
    is dropped but the spaces where a line breaks."""
    head = f"  {label + ':':<10}"
    return textwrap.wrap(
        text,
        width=max(width, len(head) + 20),
        initial_indent=head,
        subsequent_indent=_INDENT,
        break_on_hyphens=False,
    ) or [head.rstrip()]


def _outcome(explanation: Explanation) -> str:
    action = explanation.action
    result, outcome = action.result, action.outcome
    if outcome == "denied":
        return "denied: the tool did not run"
    if result is None:
        return "no result recorded (crashed, still running, or the outcome write failed)"
    timing = f" in {result.duration_ms} ms"
    if outcome == "failed":
        return f"failed{timing}: {_clip(result.err)}"
    return f"succeeded{timing}: {_clip(result.result or '')}"


def _ref_line(explanation: Explanation, index: int) -> str:
    ref = explanation.evidence[index]
    request = explanation.request
    if request is not None and ref.id and ref.id == str(request.event_id):
        return f"{ref.source} {ref.id} (the run's request)"
    return f"{ref.source} {ref.id}" + (f" {ref.hash}" if ref.hash else " (no hash captured)")


def why_text(explanation: Explanation, width: int = 100) -> str:
    """The account for people: the reason and the gate's reason whole, wrapped to
    ``width``; args, result and request cut at 200 characters (``--json`` has all)."""
    intent = explanation.action.intent
    verdict = str(intent.verdict) if intent.verdict else "no verdict"
    lines = [
        f"{intent.tool or '?'} (call {intent.call_id or '?'}) in run "
        f"{intent.run_id or '?'}: {verdict}",
        *_wrapped("reason", intent.reason or "(none recorded)", width),
        f"  args:     {_clip(intent.args or '(none)')}",
        f"  outcome:  {_outcome(explanation)}",
    ]
    decision = explanation.decision
    if decision is not None:
        gate = f"{decision.verdict or '?'}: {decision.reason}"
        lines += _wrapped("gate", gate, width)
    evidence = [_ref_line(explanation, i) for i in range(len(explanation.evidence))]
    evidence = evidence or ["(none)"]
    lines.append(f"  evidence: {evidence[0]}")
    lines.extend(f"{_INDENT}{line}" for line in evidence[1:])
    request = explanation.request
    if request is None:
        lines.append("  request:  (missing: the run's head was not recorded)")
    else:
        lines.append(
            f"  request:  {_clip(request.args or request.preview or '')} "
            f"(event {request.event_id}, {format_time(request.time)})"
        )
    lines.extend(f"  anomaly:  {a}" for a in explanation.anomalies)
    return "\n".join(lines)
