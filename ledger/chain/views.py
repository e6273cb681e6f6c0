"""A chain as data and as text: what ``ledger chain --json`` and ``ledger chain`` show,
as library calls (:meth:`Chain.to_dict <ledger.chain.Chain.to_dict>`,
:meth:`Chain.render <ledger.chain.Chain.render>`).

>>> from ledger.chain import assemble_chain
>>> from ledger.model import Event
>>> chain = assemble_chain([Event(kind="request", run_id="r1", args='"tidy up"')])
>>> chain.to_dict()["request"]["args"]
'tidy up'
>>> print(chain.render())
run r1 (1 event)
  request: "tidy up"
  available: (none)
  actions: (none)

``args`` and ``result`` appear as the JSON values they hold (a stored raw text that does
not parse, which the model never stores, stays text); times in the one RFC 3339 form with
microseconds. ``who`` fields (``actor``, ``approval``) appear when recorded.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any, Protocol

from ledger.chain.explain import clip, erased_parts
from ledger.chain.parts import Action, Anomaly
from ledger.model.codec import approval_dict
from ledger.model.erasure import erased_text, request_shown
from ledger.model.event import Event
from ledger.model.shown import one_line
from ledger.model.values import Approval, Ref
from ledger.timefmt import format_time, format_time_us

__all__ = [
    "ChainParts",
    "action_dict",
    "anomaly_dict",
    "available_count",
    "chain_dict",
    "erased_reads",
    "event_dict",
    "outcome_text",
    "raw_json_value",
    "ref_text",
    "render_chain",
]


class ChainParts(Protocol):
    """What the views read of a chain (:class:`~ledger.chain.Chain` is one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def request(self) -> Event | None: ...
    @property
    def available(self) -> tuple[Ref, ...]: ...
    @property
    def actions(self) -> tuple[Action, ...]: ...
    @property
    def anomalies(self) -> tuple[Anomaly, ...]: ...
    @property
    def events(self) -> tuple[Event, ...]: ...


def raw_json_value(text: str | None) -> Any:
    """A stored raw-JSON ``args`` or ``result`` as the value it encodes (``None`` stays
    ``None``; text that does not parse stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def event_dict(e: Event) -> dict[str, Any]:
    """An event in the reference's JSON shape, ``args``/``result`` as JSON values."""
    value: dict[str, Any] = json.loads(e.to_json())
    value["time"] = format_time_us(e.time)  # one width, as all machine output
    if e.approval is not None and e.approval.time is not None:
        value["approval"]["time"] = format_time_us(e.approval.time)
    return value


def outcome_text(a: Action) -> str:
    """``succeeded in 3 ms``, ``failed (no duration recorded)``, ``denied``, ...: a
    duration of 0 is "not measured" (the gate rounds a measured one up to 1 ms)."""
    if a.outcome in ("denied", "no_result") or a.result is None:
        return a.outcome
    ms = a.result.duration_ms
    return f"{a.outcome} in {ms} ms" if ms else f"{a.outcome} (no duration recorded)"


def action_dict(a: Action, decision: Event | None = None) -> dict[str, Any]:
    """One action of a chain: intent, verdict, reason, who, evidence, result."""
    result = a.result
    intent = a.intent
    approval = intent.approval or (decision.approval if decision is not None else None)
    return {
        "call_id": a.call_id,
        "tool": a.tool,
        "args": raw_json_value(intent.args),
        "verdict": str(a.verdict) if a.verdict else None,
        "reason": intent.reason,
        "policy": decision.label if decision is not None else "",
        "approval": _approval(approval),
        "outcome": a.outcome,
        "evidence": [r.to_dict() for r in a.evidence],
        "result": raw_json_value(result.result) if result else None,
        "err": result.err if result else "",
        "duration_ms": result.duration_ms if result and result.duration_ms else None,
        "time": format_time_us(intent.time),
        "intent_event_id": str(intent.event_id),
        "result_event_id": str(result.event_id) if result else None,
        **erased_parts(intent, result),
    }


def _approval(approval: Approval | None) -> dict[str, str] | None:
    if approval is None:
        return None
    out = approval_dict(approval)
    if approval.time is not None:
        out["time"] = format_time_us(approval.time)
    return out


def anomaly_dict(x: Anomaly) -> dict[str, Any]:
    """One anomaly with stable field names."""
    return {"code": str(x.code), "detail": x.detail, "call_id": x.call_id,
            "event_ids": list(x.event_ids)}  # fmt: skip


def _decisions(events: Sequence[Event]) -> dict[str, Event]:
    found: dict[str, Event] = {}
    for e in events:
        if e.kind == "gate_decision" and e.call_id:
            found.setdefault(e.call_id, e)
    return found


def chain_dict(chain: ChainParts) -> dict[str, Any]:
    """A chain with stable field names (the ``ledger chain --json`` output)."""
    decisions = _decisions(chain.events)
    actor = next((e.actor for e in chain.events if e.actor is not None), None)
    return {
        "run_id": chain.run_id,
        "actor": actor.to_dict() if actor is not None else None,
        "request": event_dict(chain.request) if chain.request else None,
        "available": [r.to_dict() for r in chain.available],
        "actions": [action_dict(a, decisions.get(a.call_id)) for a in chain.actions],
        "anomalies": [anomaly_dict(x) for x in chain.anomalies],
        "events": len(chain.events),
    }


def erased_reads(events: Sequence[Event]) -> list[str]:
    """``[erased: <reason>]`` once per distinct reason for the ``retrieved`` events whose
    refs were erased: what was available to the agent and is no longer listed.

    >>> erased_reads([Event(kind="retrieved", run_id="r", refs=[{"source": "memory", "id": "m"}])])
    []
    """
    found = (erased_text(e, "refs") for e in events if e.kind == "retrieved")
    return list(dict.fromkeys(t for t in found if t))


def ref_text(ref: Ref, events: Sequence[Event] = (), *, short: bool = False) -> str:
    """A ref for people: what it points at when the chain holds it (the run's request,
    or the result of a safe read, named by its tool), its id, and its hash (``short``:
    12 hex digits); ``[erased: <reason>]`` after it when that result was erased."""
    digest = ref.hash
    if short and ":" in digest and len(digest.partition(":")[2]) > 12:
        algo, _, hexed = digest.partition(":")
        digest = f"{algo}:{hexed[:12]}…"
    what = str(ref.source)
    if ref.source == "tool":
        found = next((e for e in events if str(e.event_id) == ref.id), None)
        if found is not None and found.kind == "request":
            return f"the run's request (event {ref.id})"
        if found is not None and found.kind == "tool_result":
            what = f"{found.tool or 'tool'} result"
            gone = erased_text(found, "result")
            if gone:  # the cited result was erased since: say so, not "no hash"
                return f"{what} {ref.id} " + (f"{digest} {gone}" if digest else gone)
    return f"{what} {ref.id} " + (digest or "(no hash captured)")


def _wrapped(prefix: str, text: str, width: int) -> list[str]:
    indent = " " * len(prefix)
    return textwrap.wrap(
        text, width=max(width, len(prefix) + 20), initial_indent=prefix,
        subsequent_indent=indent, break_on_hyphens=False,
    ) or [prefix.rstrip()]  # fmt: skip


def available_count(available: Sequence[Ref], gone_reads: Sequence[str]) -> str:
    """How many things were available, as a chain's heading says it: the refs listed,
    and the reads whose refs were erased (one line each below it).

    >>> available_count([], ["[erased: GDPR 42]"])
    '0 + 1 erased'
    """
    erased = f" + {len(gone_reads)} erased" if gone_reads else ""
    return f"{len(available)}{erased}"


def render_chain(chain: ChainParts, width: int = 80) -> str:
    """The chain as an indented text tree wrapped to ``width``: the request, what was
    available, each action (verdict, outcome, reason, who approved, args, evidence,
    result) and every anomaly, with nothing hidden."""
    n = len(chain.events)
    lines = [f"run {chain.run_id} ({n} event{'s' if n != 1 else ''})"]
    actor = next((e.actor for e in chain.events if e.actor is not None), None)
    if actor is not None:
        lines += _wrapped("  acting for: ", _actor_text(actor.to_dict()), width)
    req = chain.request
    shown = clip(request_shown(req), 200) if req else "(missing: no request recorded)"
    lines += _wrapped("  request: ", shown, width)
    gone_reads = erased_reads(chain.events)
    if not chain.available and not gone_reads:
        lines.append("  available: (none)")
    else:
        lines.append(f"  available ({available_count(chain.available, gone_reads)}):")
        for ref in chain.available:
            lines += _wrapped("    ", ref_text(ref, chain.events), width)
        for text in gone_reads:
            lines += _wrapped("    ", text, width)
    decisions = _decisions(chain.events)
    if not chain.actions:
        lines.append("  actions: (none)")
    else:
        lines.append(f"  actions ({len(chain.actions)}):")
    for a in chain.actions:
        verdict = str(a.verdict) if a.verdict else "no verdict"
        head = f"{a.tool or '?'} call {a.call_id or '?'}: {verdict}"
        if a.outcome != "denied":  # "denied, denied" says nothing twice
            head += f", {outcome_text(a)}"
        lines += _wrapped("    ", head, width)
        reason = erased_text(a.intent, "reason") or a.intent.reason or "(none recorded)"
        lines += _wrapped("      reason: ", reason, width)
        decision = decisions.get(a.call_id)
        approval = a.intent.approval or (decision.approval if decision else None)
        if approval is not None:
            when = f" at {format_time(approval.time)}" if approval.time else ""
            why = f": {approval.reason}" if approval.reason else ""
            lines += _wrapped("      approved by: ", f"{approval.approver}{when}{why}", width)
        elif gone := erased_text(a.intent, "approval") or erased_text(decision, "approval"):
            lines += _wrapped("      approved by: ", gone, width)
        args = erased_text(a.intent, "args") or a.intent.args or "(none)"
        lines += _wrapped("      args: ", clip(args, 200), width)
        for ref in a.evidence:
            lines += _wrapped("      evidence: ", ref_text(ref, chain.events), width)
        gone = erased_text(a.intent, "refs")
        if gone and not a.evidence:  # erased evidence reads as erased, not as none
            lines += _wrapped("      evidence: ", gone, width)
        if a.result is not None:
            body = (
                erased_text(a.result, "result", "err") or a.result.err or clip(a.result.result, 200)
            )
            lines += _wrapped("      result: ", body or "(empty)", width)
    for x in chain.anomalies:
        lines += _wrapped("  anomaly: ", str(x), width)
    return "\n".join(map(one_line, lines))  # recorded text cannot start a line


def _actor_text(actor: dict[str, str]) -> str:
    parts = [actor.get("principal", "") or "(no principal)"]
    if actor.get("agent_id"):
        version = f" {actor['agent_version']}" if actor.get("agent_version") else ""
        parts.append(f"agent {actor['agent_id']}{version}")
    return ", ".join(parts)
