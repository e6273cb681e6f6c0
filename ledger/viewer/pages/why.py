"""Why one action happened (``/why?run=RUN&call=CALL``): ``Chain.why(call)`` shown.

The page lays the :class:`~ledger.chain.Explanation` out (verdict and reason, the gate's
decision and any approval, arguments, outcome, the evidence with its drift state, the
request that started the run, anomalies) and shows ``render()``, the text ``ledger why``
prints. ``&format=json`` answers its ``to_dict()`` as JSON.
"""

from __future__ import annotations

import json

from ledger.chain.explain import Explanation
from ledger.ids import ulid_text
from ledger.model.erasure import erased_text, request_field
from ledger.model.event import Event
from ledger.sinks.base import Reader
from ledger.viewer.html import esc, href, link, value
from ledger.viewer.identity import approval_of
from ledger.viewer.pages.parts import duration_text, ref_list, run_link, verdict_badge, when_text
from ledger.viewer.pages.run import load_chain, ref_checks
from ledger.viewer.routing import Context, NotFound, Request, Response, html_response

__all__ = ["why_page"]


def _outcome(x: Explanation) -> str:
    result, outcome = x.action.result, x.action.outcome
    if outcome == "denied":
        return '<span class="badge b-denied">denied</span> the tool did not run'
    if result is None:
        return (
            '<span class="badge b-no_result">no result</span> crashed, still running, or '
            "the outcome write failed"
        )
    if outcome == "erased":  # whether it failed went with the erased err
        return f"ran, {_erased(result, 'err')} {duration_text(result.duration_ms)}"
    css = "failed" if outcome == "failed" else "succeeded"
    return f'<span class="badge b-{css}">{css}</span> {duration_text(result.duration_ms)}'


def _erased(event: Event | None, *fields: str) -> str:
    """The marker shown in place of an erased part ("" when not erased)."""
    text = erased_text(event, *fields)
    return f'<span class="muted">{esc(text)}</span>' if text else ""


def _body(x: Explanation, run_id: str, checks: dict, ctx: Context) -> str:  # type: ignore[type-arg]
    intent, result = x.action.intent, x.action.result
    rows: list[tuple[str, str]] = [
        ("verdict", verdict_badge(intent.verdict)),
        (
            "reason",
            _erased(intent, "reason")
            or esc(intent.reason)
            or '<span class="muted">(none recorded)</span>',
        ),
    ]
    if x.decision is not None:
        d = x.decision
        rows.append(
            (
                "gate",
                f"{verdict_badge(d.verdict)} {esc(d.reason)}"
                + (f' <span class="muted small">label {esc(d.label)}</span>' if d.label else ""),
            )
        )
    for source in (x.decision, intent):
        found = approval_of(source) if source is not None else None
        if found is not None:
            when = f" at {when_text(found.time)}" if found.time else ""
            why = f": {esc(found.reason)}" if found.reason else ""
            rows.append(("approval", f"approved by <b>{esc(found.approver)}</b>{when}{why}"))
            break
    rows.append(
        (
            "args",
            _erased(intent, "args")
            or value(
                intent.args,
                limit=600,
                whole=href("/value", event=ulid_text(intent.event_id), field="args"),
            ),
        )
    )
    rows.append(("outcome", _outcome(x)))
    if result is not None:
        if result.err:
            rows.append(("error", f'<span class="v">{esc(result.err[:4000])}</span>'))
        rows.append(
            (
                "result",
                _erased(result, "result")
                or value(
                    result.result,
                    limit=600,
                    whole=href("/value", event=ulid_text(result.event_id), field="result"),
                ),
            )
        )
    request_id = ulid_text(x.request.event_id) if x.request is not None else ""
    rows.append(
        (
            "evidence",
            ref_list(
                x.evidence,
                checks,
                request_id=request_id,
                empty=erased_text(intent, "refs") or "(none cited)",
            ),
        )
    )
    if x.request is None:
        rows.append(
            ("request", '<span class="muted">missing: the run\'s head was not recorded</span>')
        )
    else:
        r = x.request
        rows.append(
            (
                "request",
                (_erased(r, field := request_field(r)) or value(getattr(r, field) or "", limit=400))
                + " "
                + link(href("/event", id=request_id), request_id, css="mono small")
                + f' <span class="muted small">{when_text(r.time)}</span>',
            )
        )
    if x.anomalies:
        items = "".join(f'<li class="anom">{esc(str(a))}</li>' for a in x.anomalies)
        rows.append(("anomalies", f"<ul>{items}</ul>"))
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    denied = x.action.denied
    banner = (
        f'<div class="note {"bad" if denied else "ok"}" id="verdict">'
        f"<b>{esc(intent.tool or '?')}</b> was {'refused' if denied else 'allowed'}: "
        f"{esc(erased_text(intent, 'reason') or intent.reason or 'no reason recorded')}</div>"
    )
    json_link = link(
        href("/why", run=run_id, call=intent.call_id, format="json"), "as JSON", id_="why-json"
    )
    return (
        f'<div class="crumbs">{link("/", "Runs")} / {run_link(run_id)} / why</div>'
        f'<h1 id="title">Why <span class="mono">{esc(intent.tool or "?")}</span> '
        f'<span class="muted small mono">call {esc(intent.call_id)}</span></h1>'
        + banner
        + f'<div class="card" id="explanation"><dl class="kv">{kv}</dl></div>'
        + "<h2>As <code>ledger why</code> prints it</h2>"
        + f'<pre id="why-text">{esc(x.render(width=100))}</pre>'
        + f'<p class="small">{json_link}</p>'
    )


def why_page(request: Request, ctx: Context) -> Response:
    """The why page (or its JSON)."""
    params = request.params
    if "run" not in params or not params.get("call"):
        raise NotFound(
            "give a run and a call: /why?run=RUN&call=CALL (the run page links each action)"
        )
    reader = ctx.reader
    assert isinstance(reader, Reader)
    chain, _ = load_chain(reader, params["run"])
    explanation = chain.why(params["call"])
    if params.get("format") == "json":
        text = json.dumps(explanation.to_dict(), ensure_ascii=True, indent=2)
        return Response(status=200, body=text.encode("ascii"), content_type="application/json")
    checks = ref_checks(reader, explanation.evidence)
    body = _body(explanation, chain.run_id or params["run"], checks, ctx)
    return html_response(200, f"Why {explanation.tool}", body, ctx, here="runs")
