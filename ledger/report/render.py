"""The compliance report's written forms: one self-contained HTML page, and CSV.

>>> Path("report.html").write_text(render_html(report), encoding="utf-8")  # doctest: +SKIP
>>> Path("report.csv").write_text(render_csv(report), encoding="utf-8")    # doctest: +SKIP

Everything is inline: the style sheet, and the chart of actions and denials over time as
an ``<svg>`` element (id ``timeline-chart``). No script, no font, no image and no link
leaves the file, so it opens in a browser without a network and can be archived as is.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from html import escape
from typing import Any, Protocol

from ledger.model.shown import csv_cell, inert_text
from ledger.report.hashes import HashCheck
from ledger.report.listing import LISTINGS
from ledger.report.model import (
    ApprovalGroup,
    ApprovedAction,
    Denial,
    Finding,
    Listed,
    TimeBucket,
    ToolStats,
    WhoStats,
    run_outcome,
    time_text,
)
from ledger.sinks.base import RunSummary
from ledger.timefmt import format_time

__all__ = ["CSV_COLUMNS", "ReportView", "csv_records", "render_csv", "render_html", "render_svg"]


class ReportView(Protocol):
    """What the renderers read of a report (:class:`~ledger.report.document.ReportView`
    is one)."""

    @property
    def generated_at(self) -> datetime: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def until(self) -> datetime | None: ...
    @property
    def events(self) -> int: ...
    @property
    def runs(self) -> tuple[RunSummary, ...]: ...
    @property
    def tools(self) -> tuple[ToolStats, ...]: ...
    @property
    def denials(self) -> tuple[Denial, ...]: ...
    @property
    def missing_results(self) -> tuple[Finding, ...]: ...
    @property
    def unsafe_without_intent(self) -> tuple[Finding, ...]: ...
    @property
    def oldest_record(self) -> datetime | None: ...
    @property
    def newest_record(self) -> datetime | None: ...
    @property
    def hash_check(self) -> HashCheck: ...
    @property
    def timeline(self) -> tuple[TimeBucket, ...]: ...
    @property
    def approved(self) -> tuple[ApprovedAction, ...]: ...
    @property
    def agents(self) -> tuple[WhoStats, ...]: ...
    @property
    def principals(self) -> tuple[WhoStats, ...]: ...
    @property
    def outside_runs(self) -> tuple[Finding, ...]: ...
    @property
    def ledger(self) -> str: ...
    @property
    def actions(self) -> int: ...
    @property
    def compliant(self) -> bool: ...
    @property
    def counts(self) -> Listed: ...
    @property
    def approval_groups(self) -> tuple[ApprovalGroup, ...]: ...
    def unsafe_statement(self) -> str: ...
    def log_statement(self) -> str: ...
    def listing(self) -> dict[str, Any]: ...
    def to_dict(self) -> dict[str, Any]: ...


CSV_COLUMNS = ("section", "run_id", "call_id", "tool", "time", "count", "detail")
"""The columns of :func:`render_csv`, and the keys of :func:`csv_records`."""


def render_csv(r: ReportView) -> str:
    """One long table: ``section,run_id,call_id,tool,time,count,detail``."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in _csv_rows(r):  # recorded text on one line, inert (as every text output)
        w.writerow([csv_cell(c) if isinstance(c, str) else c for c in row])
    return out.getvalue()


def csv_records(r: ReportView) -> Iterator[dict[str, str]]:
    """The rows of :func:`render_csv` as text keyed by :data:`CSV_COLUMNS`, recorded
    text as recorded (the CSV shows it on one line; a JSON form of these rows, as
    ``ledger report --nl`` writes, reads back exactly what was recorded)."""
    for row in _csv_rows(r):
        yield dict(zip(CSV_COLUMNS, ("" if c is None else str(c) for c in row), strict=True))


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;
max-width:1100px;color:#1b1f23;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;
border-bottom:1px solid #d0d7de;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;margin:.5em 0;table-layout:auto}
th,td{border:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top;
overflow-wrap:anywhere;word-break:break-word}
th{background:#f6f8fa}td.t{white-space:nowrap}td.id{font-family:ui-monospace,monospace;
font-size:.85em;word-break:break-all;min-width:8ch}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.wrap{max-width:100%;overflow-x:auto}p,li{overflow-wrap:anywhere}
.ok{background:#dafbe1;border:1px solid #4ac26b;padding:.6em 1em;border-radius:6px}
.bad{background:#ffebe9;border:1px solid #ff8182;padding:.6em 1em;border-radius:6px}
.muted{color:#57606a}code{font-size:.92em}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #d0d7de;
border-radius:6px;padding:.5em 1em;min-width:8em}.card b{display:block;font-size:1.5em}
"""

_W, _H = 1000, 280
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 50, 10, 20, 50
_ACTION_COLOR, _DENIAL_COLOR = "#0969da", "#cf222e"


def _t(value: datetime | None) -> str:
    return format_time(value) if value is not None else "open"


def _h(value: datetime | None) -> str:
    """A table cell's time: ``2026-11-30 14:44:44`` (UTC; the JSON has microseconds)."""
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


class _Time(str):
    """A time cell (kept on one line)."""

    css = "t"


class _Id(str):
    """An id cell (monospace, may break anywhere)."""

    css = "id"


def _cell(v: object) -> str:
    if isinstance(v, int):
        return f'<td class="n">{v}</td>'
    css = getattr(v, "css", None)
    attr = f' class="{css}"' if css else ""
    return f"<td{attr}>{escape(str(v))}</td>"


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], empty: str) -> str:
    body = ["<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows]
    if not body:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="wrap">{table}</div>'


def _findings(findings: Iterable[Finding], empty: str) -> str:
    """A table of findings (time, run, call, tool, detail)."""
    rows = ((_Time(_h(f.time)), _Id(f.run_id), _Id(f.call_id), f.tool, f.detail) for f in findings)
    return _table(("time (UTC)", "run", "call", "tool", "detail"), rows, empty)


def _label(moment: datetime, width_s: float, span_days: float) -> str:
    if span_days >= 2:
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%H:%M:%S" if width_s < 60 else "%m-%d %H:%M")


def _width_text(seconds: float) -> str:
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''}"
    n = int(seconds)
    return f"{n} second{'s' if n != 1 else ''}"


def _ticks(top: int) -> list[int]:
    """Up to five round values from 0 to ``top`` for the y axis."""
    step = max(1, -(-top // 4))
    return list(range(0, top + 1, step)) + ([top] if top % step else [])


def render_svg(buckets: Sequence[TimeBucket]) -> str:
    """A grouped bar chart (actions blue, denials red, side by side) per time bucket, as
    inline SVG that scales to the page width."""
    if not buckets:
        return '<p class="muted">No events in the window: nothing to chart.</p>'
    top = max(1, *(max(b.actions, b.denials) for b in buckets))
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B
    slot = plot_w / len(buckets)
    bar = min(28.0, max(1.0, slot * 0.38))
    width_s = (buckets[0].end - buckets[0].start).total_seconds()
    span_days = (buckets[-1].end - buckets[0].start).total_seconds() / 86400
    base = _PAD_T + plot_h
    parts = [
        f'<svg id="timeline-chart" xmlns="http://www.w3.org/2000/svg" width="100%" '
        f'viewBox="0 0 {_W} {_H}" role="img" style="max-width:{_W}px;height:auto" '
        'aria-label="Actions and denials over time">',
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
    ]
    for tick in _ticks(top):
        y = base - plot_h * tick / top
        parts.append(
            f'<line x1="{_PAD_L}" y1="{y:.1f}" x2="{_W - _PAD_R}" y2="{y:.1f}" '
            f'stroke="{"#57606a" if tick == 0 else "#d8dee4"}"/>'
            f'<text x="{_PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="12" '
            f'fill="#57606a">{tick}</text>'
        )
    step = max(1, -(-len(buckets) // 8))
    for i, b in enumerate(buckets):
        x = _PAD_L + i * slot
        left = x + (slot - 2 * bar - 2) / 2
        for offset, value, color, name in (
            (0.0, b.actions, _ACTION_COLOR, "actions"),
            (bar + 2, b.denials, _DENIAL_COLOR, "denials"),
        ):
            h = plot_h * value / top
            parts.append(
                f'<rect class="{name}" x="{left + offset:.1f}" y="{base - h:.1f}" '
                f'width="{bar:.1f}" height="{h:.1f}" fill="{color}">'
                f"<title>{_t(b.start)}: {value} {name}</title></rect>"
            )
        if i % step == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{base + 16}" font-size="12" '
                f'text-anchor="middle" fill="#1b1f23">'
                f"{escape(_label(b.start, width_s, span_days))}</text>"
            )
    if not any(b.actions or b.denials for b in buckets):
        parts.append(
            f'<text x="{_PAD_L + plot_w / 2:.1f}" y="{_PAD_T + plot_h / 2:.1f}" '
            'text-anchor="middle" font-size="14" fill="#57606a">'
            "no actions and no denials in the window</text>"
        )
    legend_y = _H - 8
    caption = f"one pair of bars per {_width_text(width_s)}, times in UTC"
    parts += [
        f'<rect x="{_PAD_L}" y="{legend_y - 9}" width="10" height="10" fill="{_ACTION_COLOR}"/>',
        f'<text x="{_PAD_L + 14}" y="{legend_y}" font-size="12">actions</text>',
        f'<rect x="{_PAD_L + 80}" y="{legend_y - 9}" width="10" height="10" '
        f'fill="{_DENIAL_COLOR}"/>',
        f'<text x="{_PAD_L + 94}" y="{legend_y}" font-size="12">denials</text>',
        f'<text x="{_W - _PAD_R}" y="{legend_y}" font-size="12" text-anchor="end" '
        f'fill="#57606a">{escape(caption)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def _allowed_by(a: ApprovedAction) -> str:
    if a.approver:
        when = f" at {_h(a.approved_at)}" if a.approved_at else ""
        policy = f" (policy {a.policy})" if a.policy else ""
        return f"{a.approver}{when}{policy}"
    return f"policy {a.policy}" if a.policy else "(not recorded)"


def _more(r: ReportView, name: str) -> str:
    """The note under a listing that shows only its first items: how many more, and
    the command that lists them all."""
    listing = r.listing()
    more = listing["more"].get(name)
    if not more:
        return ""
    return (
        f'<p class="muted">The first {listing["limit"]} in time order are listed, and '
        f"{more} more: <code>{escape(listing['full'][name])}</code> lists them all "
        f"(its <code>{escape(LISTINGS[name])}</code>).</p>"
    )


def _cards(r: ReportView) -> str:
    c = r.counts
    items = (
        ("events", r.events),
        ("runs", c.runs),
        ("actions", r.actions),
        ("denials", c.denials),
        ("no result", c.missing_results),
        ("ran without intent", c.unsafe_without_intent),
    )
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{n}</b>{escape(k)}</div>' for k, n in items)
        + "</div>"
    )


def _verdicts(r: ReportView) -> str:
    cls = "ok" if not r.counts.unsafe_without_intent else "bad"
    hc = r.hash_check
    hcls = "ok" if hc.available and not hc.mismatch_count else "bad"
    lcls = "bad" if r.log_statement().startswith("VIOLATION") else "ok"
    return (
        f'<p class="{cls}" id="unsafe-statement"><b>{escape(r.unsafe_statement())}.</b></p>'
        f'<p class="{hcls}" id="hash-statement">{escape(hc.summary())}.</p>'
        f'<p class="{lcls}" id="log-statement">{escape(r.log_statement())}.</p>'
    )


def _sections(r: ReportView) -> list[str]:
    hc = r.hash_check
    return [
        "<h2>Runs and their outcomes</h2>",
        _table(
            (
                "run",
                "first (UTC)",
                "last (UTC)",
                "events",
                "action records",
                "denials",
                "errors",
                "outcome",
            ),
            (
                (
                    _Id(x.run_id),
                    _Time(_h(x.first_time)),
                    _Time(_h(x.last_time)),
                    x.events,
                    x.actions,
                    x.denials,
                    x.errors,
                    run_outcome(x),
                )
                for x in r.runs
            ),
            "No runs in the window.",
        ),
        _more(r, "runs"),
        "<h2>Actions per tool</h2>",
        _table(
            ("tool", "allowed actions", "denials", "succeeded", "failed", "safe reads"),
            (
                (t.tool or "(none)", t.actions, t.denials, t.succeeded, t.failed, t.safe_reads)
                for t in r.tools
            ),
            "No tool activity in the window.",
        ),
        "<h2>Denials</h2>",
        _table(
            ("time (UTC)", "run", "call", "tool", "verdict", "reason"),
            (
                (_Time(_h(d.time)), _Id(d.run_id), _Id(d.call_id), d.tool, d.verdict, d.reason)
                for d in r.denials
            ),
            "No denials in the window.",
        ),
        _more(r, "denials"),
        "<h2>Approved actions</h2>",
        '<p class="muted">Allowed non-safe actions per approver (or policy alone), tool '
        "and policy:</p>",
        _table(
            ("allowed by", "tool", "policy", "actions"),
            (
                (g.approver or "(policy alone)", g.tool, g.policy or "-", g.count)
                for g in r.approval_groups
            ),
            "No non-safe action was allowed in the window.",
        ),
        '<p class="muted">Each allowed non-safe action: who or which policy allowed it, '
        "when, for whom, and what it cited.</p>",
        _table(
            ("time (UTC)", "run", "call", "tool", "allowed by", "for", "reason", "cited"),
            (
                (
                    _Time(_h(a.time)),
                    _Id(a.run_id),
                    _Id(a.call_id),
                    a.tool,
                    _allowed_by(a),
                    a.principal or "-",
                    a.reason or "-",
                    _Id(" ".join(a.evidence) or "-"),
                )
                for a in r.approved
            ),
            "No non-safe action was allowed in the window.",
        ),
        _more(r, "approved"),
        "<h2>Who: actions and denials per agent and per principal</h2>",
        _table(
            ("agent", "runs", "allowed actions", "denials"),
            ((w.who or "(not recorded)", w.runs, w.actions, w.denials) for w in r.agents),
            "No actions or denials in the window.",
        ),
        _table(
            ("principal", "runs", "allowed actions", "denials"),
            ((w.who or "(not recorded)", w.runs, w.actions, w.denials) for w in r.principals),
            "No actions or denials in the window.",
        ),
        "<h2>Calls outside any run</h2>",
        _findings(r.outside_runs, "None: every call was made inside a run."),
        _more(r, "outside_runs"),
        "<h2>Allowed actions with no recorded result</h2>",
        _findings(r.missing_results, "Every allowed action has a recorded result."),
        _more(r, "missing_results"),
        "<h2>Non-safe actions that ran without a committed intent</h2>",
        _findings(
            r.unsafe_without_intent,
            "None: zero non-safe actions ran without a committed intent.",
        ),
        _more(r, "unsafe_without_intent"),
        "<h2>Content-hash check</h2>",
        f"<p>{escape(hc.summary())}.</p>",
        _table(
            ("event", "run", "stored", "recomputed", "detail"),
            (
                (m.event_id, m.run_id, m.stored or "-", m.computed or "-", m.detail)
                for m in hc.mismatches
            ),
            "No mismatches.",
        ),
    ]


def _retention_html(r: ReportView) -> str:
    """The retention section (:mod:`ledger.report.retention`), when the ledger has one."""
    section = getattr(r, "retention", None)
    return "" if section is None else str(section.to_html())


def render_html(r: ReportView) -> str:
    """The whole page (UTF-8 text, starting with ``<!DOCTYPE html>``)."""
    if r.since is None and r.until is None:
        window = "all records (no start or end given)"
    else:
        window = (
            f"{_t(r.since) if r.since else 'the first record'} to "
            f"{_t(r.until) if r.until else 'the last record'}"
            " (since inclusive, until exclusive)"
        )
    held = f"{_t(r.oldest_record)} to {_t(r.newest_record)}" if r.oldest_record else "none"
    page = "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>Agent ledger compliance report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Agent ledger compliance report</h1>",
            f'<p class="muted" id="ledger-named">Ledger: <code>{escape(r.ledger or "(not named)")}'
            f"</code>. Window: {escape(window)}. Records held: {escape(held)}. "
            f"Generated {escape(_t(r.generated_at))}.</p>",
            _cards(r),
            _verdicts(r),
            "<h2>Actions and denials over time</h2>",
            render_svg(r.timeline),
            *_sections(r),
            _retention_html(r),
            "</body></html>\n",
        ]
    )
    return inert_text(page)  # no control character reaches a terminal that shows it


def _csv_rows(r: ReportView) -> Iterable[list[object]]:
    d = r.to_dict()
    for key, value in d["totals"].items():
        yield ["summary", "", "", "", "", value, key]
    yield ["summary", "", "", "", "", "", f"ledger {r.ledger or '(not named)'}"]
    yield ["summary", "", "", "", time_text(r.since) or "", "", "window since"]
    yield ["summary", "", "", "", time_text(r.until) or "", "", "window until"]
    yield ["summary", "", "", "", time_text(r.oldest_record) or "", "", "oldest record held"]
    yield ["summary", "", "", "", time_text(r.newest_record) or "", "", "newest record held"]
    yield ["summary", "", "", "", "", r.counts.unsafe_without_intent, r.unsafe_statement()]
    yield ["hash_check", "", "", "", "", r.hash_check.checked, r.hash_check.summary()]
    yield ["log_check", "", "", "", "", "", r.log_statement()]
    section = getattr(r, "retention", None)
    for line in [] if section is None else section.lines():
        yield ["retention", "", "", "", "", "", line]
    for run in r.runs:
        yield ["run", run.run_id, "", "", time_text(run.first_time), run.actions, run_outcome(run)]
    for t in r.tools:
        detail = (
            f"denials={t.denials} succeeded={t.succeeded} failed={t.failed} "
            f"safe_reads={t.safe_reads}"
        )
        yield ["tool", "", "", t.tool, "", t.actions, detail]
    for den in r.denials:
        yield ["denial", den.run_id, den.call_id, den.tool, time_text(den.time), 1, den.reason]
    for f in r.missing_results:
        yield ["missing_result", f.run_id, f.call_id, f.tool, time_text(f.time), 1, f.detail]
    for f in r.unsafe_without_intent:
        yield ["unsafe_without_intent", f.run_id, f.call_id, f.tool, time_text(f.time), 1, f.detail]
    for a in r.approved:
        who = a.approver or f"policy {a.policy}"
        yield [
            "approved_action",
            a.run_id,
            a.call_id,
            a.tool,
            time_text(a.time),
            1,
            f"allowed by {who}; for {a.principal or '-'}; cited {' '.join(a.evidence) or '-'}",
        ]
    for g in r.approval_groups:
        who = g.approver or "(policy alone)"
        yield [
            "approval_group",
            "",
            "",
            g.tool,
            "",
            g.count,
            f"allowed by {who}; policy {g.policy or '-'}",
        ]
    listing = r.listing()
    for name, more in listing["more"].items():
        yield [
            "listing",
            "",
            "",
            "",
            "",
            more,
            f"{name}: {more} more not listed; {listing['full'][name]}",
        ]
    for w in r.agents:
        yield [
            "agent",
            "",
            "",
            "",
            "",
            w.actions,
            f"{w.who or '(not recorded)'}: denials={w.denials} runs={w.runs}",
        ]
    for w in r.principals:
        yield [
            "principal",
            "",
            "",
            "",
            "",
            w.actions,
            f"{w.who or '(not recorded)'}: denials={w.denials} runs={w.runs}",
        ]
    for f in r.outside_runs:
        yield ["outside_run", f.run_id, f.call_id, f.tool, time_text(f.time), 1, f.detail]
    for m in r.hash_check.mismatches:
        yield ["hash_mismatch", m.run_id, "", "", "", 1, f"{m.event_id}: {m.detail}"]
    for b in r.timeline:
        yield ["timeline", "", "", "", time_text(b.start), b.actions, f"denials={b.denials}"]
