"""One run (``/run?id=RUN``): the chain as a timeline.

The page reads ``reader.chain(run_id)``; when a stored row of the run does not read back
(:class:`~ledger.errors.CorruptRecord`) it reads the run's readable events instead,
assembles them with :func:`~ledger.chain.assemble_chain` and names the rows it left out.
Every action shows its intent (tool, arguments), the gate's decision and any approval,
its verdict and reason, the evidence it cited with each ref's drift state (``tool`` refs
are resolved through the same reader; other sources show as unverifiable), its result
or error and duration, and its anomalies; denials are highlighted. Safe reads, retrieved
items and the other events of the run sit in the timeline in event order.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from ledger.chain.assemble import Chain, assemble_chain
from ledger.chain.parts import UNINTENDED, Action, Anomaly
from ledger.drift import EventResolver, RefCheck, RefState, chain_refs, verify_refs
from ledger.errors import CorruptRecord
from ledger.ids import ulid_text
from ledger.model.erasure import request_field
from ledger.model.event import Event
from ledger.model.marks import failed
from ledger.model.values import Kind, Ref
from ledger.sinks.base import Reader
from ledger.timefmt import format_time
from ledger.viewer.html import attr, badge, esc, href, link, value
from ledger.viewer.identity import agent_of, approval_of, principal_of
from ledger.viewer.pages.parts import (
    corrupt_notice,
    duration_text,
    erased_mark,
    field_value,
    ref_list,
    request_text,
    verdict_badge,
    when_text,
)
from ledger.viewer.routing import Context, NotFound, Request, Response, html_response
from ledger.viewer.source import readable_events

__all__ = ["MAX_CHECKED_REFS", "load_chain", "ref_checks", "run_page"]

MAX_CHECKED_REFS = 500
"""Refs of one run whose drift is checked (one ``get`` each); the rest show unchecked."""


def load_chain(reader: Reader, run_id: str) -> tuple[Chain, list[CorruptRecord]]:
    """The run's chain and the rows that did not read back; ``NotFound`` when the ledger
    holds no event of the run."""
    skipped: list[CorruptRecord] = []
    try:
        chain = reader.chain(run_id)
    except CorruptRecord:
        found = sorted(
            readable_events(reader, skipped, run_id=run_id), key=lambda e: ulid_text(e.event_id)
        )
        chain = assemble_chain(found)
    if not chain.events and not skipped:
        shown = run_id if run_id else "(the events outside any run)"
        raise NotFound(f"no run {shown!r} in this ledger; pick one from the runs list")
    return chain, skipped


def ref_checks(reader: Reader, refs: Iterable[Ref]) -> dict[Ref, RefCheck]:
    """The drift state of each ref (the first :data:`MAX_CHECKED_REFS`)."""
    wanted = list(dict.fromkeys(refs))
    checked = verify_refs(wanted[:MAX_CHECKED_REFS], EventResolver(reader))
    out = {c.ref: c for c in checked}
    for ref in wanted[MAX_CHECKED_REFS:]:
        out[ref] = RefCheck(
            ref=ref, state=RefState.UNVERIFIABLE, detail="not checked: too many refs"
        )
    return out


def _whole(e: Event, name: str) -> str:
    return href("/value", event=ulid_text(e.event_id), field=name)


def _when(moment: datetime, start: datetime) -> str:
    """The time, and how long after the run's first event (``start``) it came."""
    offset = (moment - start).total_seconds()
    return f'{when_text(moment)} <span class="offset">+{offset:.3f} s</span>'


def _kv(items: Iterable[tuple[str, str]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _decision_text(decision: Event) -> str:
    parts = [verdict_badge(decision.verdict)]
    if decision.reason:
        parts.append(esc(decision.reason))
    if decision.label:
        parts.append(f'<span class="muted small">label {esc(decision.label)}</span>')
    return " ".join(parts)


def _approval_text(events: Iterable[Event]) -> str:
    for e in events:
        found = approval_of(e)
        if found is not None:
            when = f" at {when_text(found.time)}" if found.time else ""
            why = f": {esc(found.reason)}" if found.reason else ""
            return (
                f'<span class="approval">approved by <b>{esc(found.approver)}</b>{when}{why}</span>'
            )
    return ""


def _error_rows(e: Event) -> list[tuple[str, str]]:
    """The ``error`` row of a result: its text, or the erasure mark when only the error
    was erased (a whole erasure shows on the result row; it does not say there was one)."""
    if e.err:
        return [("error", f'<span class="v">{esc(e.err[:2000])}</span>')]
    gone = erased_mark(e, "err")
    return [("error", gone)] if gone and not erased_mark(e, "result") else []


def _anomaly_list(anomalies: Iterable[Anomaly]) -> str:
    items = "".join(f'<li class="anom">{esc(str(a))}</li>' for a in anomalies)
    return f"<ul>{items}</ul>" if items else ""


def _action_entry(
    n: int,
    a: Action,
    chain: Chain,
    decisions: dict[str, list[Event]],
    checks: dict[Ref, RefCheck],
    start: datetime,
) -> str:
    intent, result = a.intent, a.result
    outcome = a.outcome
    css = "action " + ("denied" if a.denied else "failed" if outcome == "failed" else "")
    request_id = ulid_text(chain.request.event_id) if chain.request is not None else ""
    rows: list[tuple[str, str]] = [
        (
            "reason",
            erased_mark(intent, "reason")
            or esc(intent.reason)
            or '<span class="muted">(none recorded)</span>',
        )
    ]
    for d in decisions.get(intent.call_id, []) if intent.call_id else []:
        rows.append(("decision", _decision_text(d)))
    approval = _approval_text([*decisions.get(intent.call_id, []), intent])
    if approval:
        rows.append(("approval", approval))
    rows.append(("args", field_value(intent, "args", intent.args, whole=_whole(intent, "args"))))
    evidence = "" if a.evidence else erased_mark(intent, "refs")  # erased, not "none"
    evidence = evidence or ref_list(a.evidence, checks, request_id=request_id, empty="(none cited)")
    rows.append(("evidence", evidence))
    if a.denied:
        rows.append(("result", '<span class="muted">the tool did not run</span>'))
    elif result is None:
        rows.append(
            (
                "result",
                badge("no result recorded", "no_result")
                + ' <span class="muted small">crashed, still running, or the outcome '
                "write failed</span>",
            )
        )
    else:
        rows += _error_rows(result)
        shown = field_value(result, "result", result.result, whole=_whole(result, "result"))
        rows.append(("result", shown))
        rows.append(("duration", duration_text(result.duration_ms)))
    who = agent_of(intent)
    if who:
        rows.append(("agent", esc(who)))
    anomalies = [x for x in chain.anomalies if x.call_id and x.call_id == intent.call_id]
    if anomalies:
        rows.append(("anomalies", _anomaly_list(anomalies)))
    why = ""
    if intent.call_id:
        why = link(
            href("/why", run=chain.run_id, call=intent.call_id),
            "why →",
            css="why-link",
            id_=f"why-{n}",
        )
    outcome_badge = "" if a.denied else " " + badge(outcome.replace("_", " "), outcome)
    return (
        f'<li class="{css.strip()}" id="call-{n}" data-call="{attr(intent.call_id)}">'
        '<div class="card"><div class="head">'
        f'<h3 class="tool">{esc(intent.tool or "?")}</h3>'
        f"{verdict_badge(intent.verdict)}{outcome_badge}"
        f'<span class="mono small muted">call {esc(intent.call_id or "(none)")}</span>{why}'
        f'<span class="when">{_when(intent.time, start)}</span></div>{_kv(rows)}</div></li>'
    )


def _read_entry(e: Event, decisions: dict[str, list[Event]], chain: Chain, start: datetime) -> str:
    rows = [("result", field_value(e, "result", e.result, whole=_whole(e, "result")))]
    rows += _error_rows(e)
    for d in decisions.get(e.call_id, []) if e.call_id else []:
        rows.append(("decision", _decision_text(d)))
    rows.append(("duration", duration_text(e.duration_ms)))
    anomalies = [x for x in chain.anomalies if ulid_text(e.event_id) in x.event_ids]
    if anomalies:
        rows.append(("anomalies", _anomaly_list(anomalies)))
    ref = link(
        href("/event", id=ulid_text(e.event_id)), "ref " + ulid_text(e.event_id), css="mono small"
    )
    unintended = any(x.code in UNINTENDED for x in anomalies)
    css = "read failed" if unintended else "read"
    mark = badge("ran without intent", "bad") if unintended else badge("safe read", "read")
    return (
        f'<li class="{css}"><div class="card"><div class="head">'
        f'<h3 class="tool">{esc(e.tool or "?")}</h3>{mark}'
        f'<span class="mono small muted">call {esc(e.call_id or "(none)")}</span>{ref}'
        f'<span class="when">{_when(e.time, start)}</span></div>{_kv(rows)}</div></li>'
    )


def _minor_entry(e: Event, checks: dict[Ref, RefCheck], start: datetime) -> str:
    kind = str(e.kind).replace("_", " ")
    rows: list[tuple[str, str]] = []
    if e.kind is Kind.RETRIEVED:
        items = "" if e.refs else erased_mark(e, "refs")
        rows.append(("items", items or ref_list(e.refs, checks, empty="(none)")))
    text = e.preview or e.args or e.result
    if text:
        field = (
            "args" if e.args and not e.preview else "result" if e.result and not e.preview else ""
        )
        rows.append(("text", value(text, whole=_whole(e, field) if field else "")))
    else:
        gone = next(filter(None, (erased_mark(e, f) for f in ("preview", "args", "result"))), "")
        if gone:
            rows.append(("text", gone))
    reason = erased_mark(e, "reason") or esc(e.reason)
    if reason:
        rows.append(("reason", reason))
    rows += _error_rows(e)
    if e.tool:
        rows.append(("tool", esc(e.tool)))
    css = "minor failed" if failed(e) or e.kind is Kind.ABORT else "minor"
    return (
        f'<li class="{css}"><div class="card"><div class="head">{badge(kind, "info")}'
        f'<span class="when">{_when(e.time, start)}</span></div>'
        f"{_kv(rows) if rows else ''}</div></li>"
    )


def _timeline(chain: Chain, checks: dict[Ref, RefCheck]) -> str:
    actions = {id(a.intent): (i, a) for i, a in enumerate(chain.actions, start=1)}
    paired = {id(a.result) for a in chain.actions if a.result is not None}
    decisions: dict[str, list[Event]] = {}
    for e in chain.events:
        if e.kind is Kind.GATE_DECISION and e.call_id:
            decisions.setdefault(e.call_id, []).append(e)
    shown_calls = {a.call_id for a in chain.actions if a.call_id} | {
        e.call_id for e in chain.events if e.kind is Kind.TOOL_RESULT and e.call_id
    }
    items: list[str] = []
    start = min((e.time for e in chain.events), default=datetime.now(UTC))
    for e in chain.events:
        if id(e) in actions:
            n, a = actions[id(e)]
            items.append(_action_entry(n, a, chain, decisions, checks, start))
        elif e.kind is Kind.TOOL_RESULT:
            if id(e) not in paired:
                items.append(_read_entry(e, decisions, chain, start))
        elif (e.kind is Kind.GATE_DECISION and e.call_id in shown_calls) or (
            e.kind is Kind.REQUEST and e is chain.request
        ):
            continue
        else:
            items.append(_minor_entry(e, checks, start))
    if not items:
        return '<p class="muted">The run has no actions or reads.</p>'
    return f'<ol class="timeline" id="timeline">{"".join(items)}</ol>'


def _stats(chain: Chain) -> str:
    times = [e.time for e in chain.events]
    failed = sum(1 for a in chain.actions if a.outcome == "failed")
    ended = any(e.kind in (Kind.RUN_END, Kind.ABORT) for e in chain.events)
    span = (max(times) - min(times)) if times else timedelta(0)
    cells = [
        ("events", str(len(chain.events)), ""),
        ("allowed", str(len(chain.actions) - len(chain.denied)), ""),
        ("denied", str(len(chain.denied)), "bad" if chain.denied else ""),
        ("failed", str(failed), "bad" if failed else ""),
        ("anomalies", str(len(chain.anomalies)), ""),
        ("span", f"{span.total_seconds():.3f} s", ""),
        ("status", "ended" if ended else "open", "ok" if ended else ""),
    ]
    return (
        '<div class="stats" id="run-stats">'
        + "".join(
            f'<div class="stat {css}" id="stat-{name}"><b>{esc(v)}</b>'
            f"<span>{esc(name)}</span></div>"
            for name, v, css in cells
        )
        + "</div>"
    )


def _who(chain: Chain) -> str:
    agents = sorted({agent_of(e) for e in chain.events} - {""})
    principals = sorted({principal_of(e) for e in chain.events} - {""})
    rows = []
    if agents:
        rows.append(
            ("agents", ", ".join(f'<span class="mono">{esc(a)}</span>' for a in agents[:20]))
        )
    if principals:
        rows.append(("principals", ", ".join(esc(p) for p in principals[:20])))
    return _kv(rows) if rows else ""


def _request_card(chain: Chain) -> str:
    r = chain.request
    if r is None:
        return '<div class="note warn" id="request">No request event: the chain has no head.</div>'
    field = request_field(r)
    text = r.preview if field == "preview" else request_text(r.args or "")
    rid = ulid_text(r.event_id)
    return (
        '<div class="card" id="request"><div class="head"><h3>Request</h3>'
        f"{link(href('/event', id=rid), rid, css='mono small')}"
        f'<span class="when">{when_text(r.time)}</span></div>'
        f"{_kv([('input', field_value(r, field, text, limit=600, whole=_whole(r, field)))])}"
        "</div>"
    )


def _anomalies(chain: Chain) -> str:
    if not chain.anomalies:
        return '<div class="note ok" id="anomalies">No anomalies.</div>'
    items = "".join(f"<li><b>{esc(a.code)}</b>: {esc(a.detail)}</li>" for a in chain.anomalies)
    n = len(chain.anomalies)
    word = "anomaly" if n == 1 else "anomalies"
    return f'<div class="note warn" id="anomalies"><b>{n} {word}</b><ul>{items}</ul></div>'


def _event_link(e: Event) -> str:
    rid = ulid_text(e.event_id)
    return link(href("/event", id=rid), rid)


def _raw(chain: Chain) -> str:
    rows = "".join(
        f'<tr><td class="id">{_event_link(e)}</td>'
        f'<td>{esc(e.kind)}</td><td class="t">{when_text(e.time)}</td>'
        f'<td class="id">{esc(e.call_id)}</td><td>{esc(e.tool)}</td></tr>'
        for e in chain.events[:2000]
    )
    more = (
        f'<p class="muted">first 2,000 of {len(chain.events):,} shown</p>'
        if len(chain.events) > 2000
        else ""
    )
    return (
        f'<details id="raw-events"><summary>All {len(chain.events)} events, as recorded</summary>'
        "<table><thead><tr><th>event</th><th>kind</th><th>time</th><th>call</th><th>tool</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>{more}</details>"
    )


def run_page(request: Request, ctx: Context) -> Response:
    """The run page."""
    if "id" not in request.params:
        raise NotFound("no run given: open a run from the runs list (/run?id=RUN)")
    run_id = request.params["id"]
    reader = ctx.reader
    assert isinstance(reader, Reader)
    chain, skipped = load_chain(reader, run_id)
    checks = ref_checks(reader, chain_refs(chain))
    times = [e.time for e in chain.events]
    window = ""
    if times:
        until = max(times) + timedelta(microseconds=1)
        window = link(
            href("/report", since=format_time(min(times)), until=format_time(until)),
            "report for this run's window",
            id_="run-report",
        )
    shown = run_id or "(outside any run)"
    gone = [erased_mark(e, "refs") for e in chain.events if e.kind is Kind.RETRIEVED]
    gone = list(dict.fromkeys(g for g in gone if g))  # retrieved items whose refs were erased
    available = (
        ref_list(chain.available, checks, empty="nothing recorded as available")
        if chain.available or not gone
        else ""
    ) + " ".join(gone)
    body = (
        f'<div class="crumbs">{link("/", "Runs")} / <span class="mono">{esc(shown)}</span></div>'
        f'<h1 id="title">Run <span class="mono">{esc(shown)}</span></h1>'
        + corrupt_notice(skipped)
        + _stats(chain)
        + _who(chain)
        + f'<p class="small">{window}</p>'
        + _request_card(chain)
        + _anomalies(chain)
        + "<h2>Available to the agent</h2>"
        + f'<div class="card" id="available">{available}</div>'
        + "<h2>Timeline</h2>"
        + _timeline(chain, checks)
        + _raw(chain)
    )
    return html_response(200, f"Run {shown}", body, ctx, here="runs")
