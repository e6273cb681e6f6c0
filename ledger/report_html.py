"""The compliance report as one self-contained HTML page.

>>> Path("report.html").write_text(render_html(report), encoding="utf-8")  # doctest: +SKIP

Everything is inline: the style sheet, and the chart of actions and denials over time as
an ``<svg>`` element (id ``timeline-chart``). No script, no font, no image and no link
leaves the file, so it opens in a browser without a network and can be archived as is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING

from ledger.report_model import run_outcome
from ledger.timefmt import format_time

if TYPE_CHECKING:
    from ledger.report import ComplianceReport, TimeBucket

__all__ = ["render_html", "render_svg"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;
max-width:1100px;color:#1b1f23;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;
border-bottom:1px solid #d0d7de;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;margin:.5em 0}
th,td{border:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{background:#dafbe1;border:1px solid #4ac26b;padding:.6em 1em;border-radius:6px}
.bad{background:#ffebe9;border:1px solid #ff8182;padding:.6em 1em;border-radius:6px}
.muted{color:#57606a}code{font-size:.92em}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #d0d7de;
border-radius:6px;padding:.5em 1em;min-width:8em}.card b{display:block;font-size:1.5em}
"""

_W, _H = 1000, 260
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 50, 10, 20, 40
_ACTION_COLOR, _DENIAL_COLOR = "#0969da", "#cf222e"


def _t(value: datetime | None) -> str:
    return format_time(value) if value is not None else "open"


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], empty: str) -> str:
    body = [
        "<tr>"
        + "".join(
            f'<td class="n">{v}</td>' if isinstance(v, int) else f"<td>{escape(str(v))}</td>"
            for v in row
        )
        + "</tr>"
        for row in rows
    ]
    if not body:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _label(moment: datetime, span_days: float) -> str:
    return moment.strftime("%Y-%m-%d" if span_days >= 2 else "%m-%d %H:%M")


def render_svg(buckets: Sequence[TimeBucket]) -> str:
    """A grouped bar chart (actions blue, denials red) per time bucket, as inline SVG."""
    if not buckets:
        return '<p class="muted">No events in the window: nothing to chart.</p>'
    top = max(1, *(max(b.actions, b.denials) for b in buckets))
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B
    slot = plot_w / len(buckets)
    bar = min(40.0, max(1.0, slot * 0.4))
    span_days = (buckets[-1].end - buckets[0].start).total_seconds() / 86400
    parts = [
        f'<svg id="timeline-chart" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
        f'height="{_H}" viewBox="0 0 {_W} {_H}" role="img" '
        'aria-label="Actions and denials over time">',
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
        f'<line x1="{_PAD_L}" y1="{_PAD_T + plot_h}" x2="{_W - _PAD_R}" '
        f'y2="{_PAD_T + plot_h}" stroke="#57606a"/>',
        f'<text x="{_PAD_L - 6}" y="{_PAD_T + 4}" text-anchor="end" font-size="11">{top}</text>',
        f'<text x="{_PAD_L - 6}" y="{_PAD_T + plot_h}" text-anchor="end" font-size="11">0</text>',
    ]
    step = max(1, len(buckets) // 8)
    for i, b in enumerate(buckets):
        x = _PAD_L + i * slot
        for offset, value, color, name in (
            (0.1, b.actions, _ACTION_COLOR, "actions"),
            (0.5, b.denials, _DENIAL_COLOR, "denials"),
        ):
            h = plot_h * value / top
            parts.append(
                f'<rect class="{name}" x="{x + slot * offset:.1f}" y="{_PAD_T + plot_h - h:.1f}" '
                f'width="{bar:.1f}" height="{h:.1f}" fill="{color}">'
                f"<title>{_t(b.start)}: {value} {name}</title></rect>"
            )
        if i % step == 0:
            parts.append(
                f'<text x="{x:.1f}" y="{_H - _PAD_B + 16}" font-size="11">'
                f"{escape(_label(b.start, span_days))}</text>"
            )
    legend_y = _H - 8
    parts += [
        f'<rect x="{_PAD_L}" y="{legend_y - 9}" width="10" height="10" fill="{_ACTION_COLOR}"/>',
        f'<text x="{_PAD_L + 14}" y="{legend_y}" font-size="12">actions</text>',
        f'<rect x="{_PAD_L + 80}" y="{legend_y - 9}" width="10" height="10" '
        f'fill="{_DENIAL_COLOR}"/>',
        f'<text x="{_PAD_L + 94}" y="{legend_y}" font-size="12">denials</text>',
        "</svg>",
    ]
    return "".join(parts)


def _cards(r: ComplianceReport) -> str:
    items = (
        ("events", r.events),
        ("runs", len(r.runs)),
        ("actions", r.actions),
        ("denials", len(r.denials)),
        ("no result", len(r.missing_results)),
        ("ran without intent", len(r.unsafe_without_intent)),
    )
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{n}</b>{escape(k)}</div>' for k, n in items)
        + "</div>"
    )


def _verdicts(r: ComplianceReport) -> str:
    cls = "ok" if not r.unsafe_without_intent else "bad"
    hc = r.hash_check
    hcls = "ok" if hc.available and not hc.mismatch_count else "bad"
    return (
        f'<p class="{cls}" id="unsafe-statement"><b>{escape(r.unsafe_statement())}.</b></p>'
        f'<p class="{hcls}" id="hash-statement">{escape(hc.summary())}.</p>'
    )


def _sections(r: ComplianceReport) -> list[str]:
    hc = r.hash_check
    return [
        "<h2>Runs and their outcomes</h2>",
        _table(
            ("run", "first", "last", "events", "action records", "denials", "errors", "outcome"),
            (
                (
                    x.run_id,
                    _t(x.first_time),
                    _t(x.last_time),
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
        "<h2>Actions per tool</h2>",
        _table(
            ("tool", "allowed actions", "denials", "succeeded", "failed", "safe reads"),
            ((t.tool, t.actions, t.denials, t.succeeded, t.failed, t.safe_reads) for t in r.tools),
            "No tool activity in the window.",
        ),
        "<h2>Denials</h2>",
        _table(
            ("time", "run", "call", "tool", "verdict", "reason"),
            ((_t(d.time), d.run_id, d.call_id, d.tool, d.verdict, d.reason) for d in r.denials),
            "No denials in the window.",
        ),
        "<h2>Allowed actions with no recorded result</h2>",
        _table(
            ("time", "run", "call", "tool", "detail"),
            ((_t(f.time), f.run_id, f.call_id, f.tool, f.detail) for f in r.missing_results),
            "Every allowed action has a recorded result.",
        ),
        "<h2>Non-safe actions that ran without a committed intent</h2>",
        _table(
            ("time", "run", "call", "tool", "detail"),
            ((_t(f.time), f.run_id, f.call_id, f.tool, f.detail) for f in r.unsafe_without_intent),
            "None: zero non-safe actions ran without a committed intent.",
        ),
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


def render_html(r: ComplianceReport) -> str:
    """The whole page (UTF-8 text, starting with ``<!DOCTYPE html>``)."""
    window = f"{_t(r.since)} to {_t(r.until)}"
    held = f"{_t(r.oldest_record)} to {_t(r.newest_record)}" if r.oldest_record else "none"
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>Agent ledger compliance report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Agent ledger compliance report</h1>",
            f'<p class="muted">Window: {escape(window)} (since inclusive, until exclusive). '
            f"Records held: {escape(held)}. Generated {escape(_t(r.generated_at))}.</p>",
            _cards(r),
            _verdicts(r),
            "<h2>Actions and denials over time</h2>",
            render_svg(r.timeline),
            *_sections(r),
            "</body></html>\n",
        ]
    )
