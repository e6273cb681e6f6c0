"""Pieces the pages share: times, verdict and outcome badges, refs with their drift
state, the notice of rows that did not read back.

>>> when_text(None)
'-'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import orjson

from ledger.drift import RefCheck, RefState
from ledger.errors import CorruptRecord
from ledger.model.erasure import Erasure, erased_reason
from ledger.model.values import Ref, Verdict
from ledger.timefmt import format_time
from ledger.viewer.html import INLINE_LIMIT, attr, badge, esc, href, link, value

__all__ = [
    "corrupt_notice",
    "duration_text",
    "erased_mark",
    "field_value",
    "ref_list",
    "request_text",
    "run_link",
    "span_text",
    "verdict_badge",
    "when_text",
]


def when_text(moment: datetime | None) -> str:
    """``2026-11-30 14:44:44.123`` (UTC, milliseconds), ``-`` when unknown; escaped."""
    if moment is None:
        return "-"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return f'<time datetime="{attr(format_time(moment))}">{esc(text)}</time>'


def duration_text(ms: int) -> str:
    """A duration; 0 reads as "not measured or under 1 ms" (the record cannot tell)."""
    if ms <= 0:
        return '<span class="muted" title="0 recorded: not measured, or under 1 ms">—</span>'
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.2f} s"


def span_text(span: timedelta) -> str:
    """How long a run took: ``850 ms``, ``12.4 s``, ``3 min 5 s``, ``2 h 10 min``."""
    seconds = span.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def request_text(raw: str) -> str:
    """A request's text for a listing: a JSON string decoded, anything else as is.

    >>> request_text('"tidy the notes"'), request_text('{"task": 1}')
    ('tidy the notes', '{"task": 1}')
    """
    if raw.startswith('"'):
        try:
            found = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        return found if isinstance(found, str) else raw
    return raw


def verdict_badge(verdict: Verdict | None) -> str:
    """The verdict as a badge (``no verdict`` when missing)."""
    if verdict is None:
        return badge("no verdict", "none")
    return badge(str(verdict).replace("_", " "), str(verdict))


def run_link(run_id: str, text: str | None = None) -> str:
    """A link to the run's page (the empty run id is "events outside any run")."""
    shown = text if text is not None else (run_id or "(outside any run)")
    return link(href("/run", id=run_id) if run_id else "/run?id=", shown, css="mono")


_STATE_TITLES = {
    RefState.INTACT: "the item still hashes to what the action saw",
    RefState.DRIFTED: "the item changed since the action saw it",
    RefState.MISSING: "the item is unknown or was deleted",
    RefState.ERASED: "the item's content was erased by retention (not drift)",
    RefState.UNVERIFIABLE: "cannot be checked here",
}


def ref_item(ref: Ref, check: RefCheck | None, request_id: str = "") -> str:
    """One ref: source, id (a tool ref links to its event), hash, drift state."""
    source = str(ref.source)
    rid = esc(ref.id) if ref.id else '<span class="muted">(no id)</span>'
    if source == "tool" and ref.id:
        rid = link(href("/event", id=ref.id), ref.id, css="mono")
    else:
        rid = f'<span class="mono">{rid}</span>'
    note = ""
    if ref.id and ref.id == request_id:
        note = ' <span class="muted small">(the run\'s request)</span>'
        if not ref.hash:  # cited by id alone: nothing to check it against
            return f"<li>{badge(source, 'read')} {rid}{note}</li>"
    digest = (
        f' <span class="mono muted small" title="{attr(ref.hash)}">{esc(ref.hash[:23])}'
        + ("…" if len(ref.hash) > 23 else "")
        + "</span>"
        if ref.hash
        else ' <span class="muted small">(no hash captured)</span>'
    )
    state = ""
    if check is not None:
        tip = check.detail or _STATE_TITLES[check.state]
        css = "warn" if check.state is RefState.ERASED else str(check.state)
        state = " " + badge(str(check.state), css, title=tip)
    return f"<li>{badge(source, 'read')} {rid}{note}{digest}{state}</li>"


def ref_list(
    refs: Sequence[Ref], checks: dict[Ref, RefCheck], *, request_id: str = "", empty: str
) -> str:
    """A list of refs with their drift states (``checks``, by ref)."""
    if not refs:
        return f'<span class="muted">{esc(empty)}</span>'
    items = "".join(ref_item(r, checks.get(r), request_id) for r in refs)
    return f'<ul class="refs">{items}</ul>'


def erased_mark(event: object, name: str) -> str:
    """``[erased: reason]`` when retention erased field ``name`` of ``event`` (the
    ``erased`` member of a tombstone, where events have one), else ""."""
    found = getattr(event, "erased", None)
    if not isinstance(found, Erasure) or name not in found.fields:
        return ""
    reason = erased_reason(cast(Any, event), name)
    return badge(f"erased: {reason}" if reason else "erased", "warn", title="removed by retention")


def field_value(event: object, name: str, text: str | None, *, limit: int = INLINE_LIMIT,
                whole: str = "", empty: str = "(none)") -> str:  # fmt: skip
    """A field's value clipped (:func:`~ledger.viewer.html.value`), or its erasure mark."""
    return erased_mark(event, name) or value(text, limit=limit, whole=whole, empty=empty)


def corrupt_notice(skipped: Iterable[CorruptRecord]) -> str:
    """A warning naming the rows that did not read back (empty when none)."""
    found = list(skipped)
    if not found:
        return ""
    shown = "".join(f"<li>{esc(str(exc))}</li>" for exc in found[:20])
    more = f"<li>… and {len(found) - 20} more</li>" if len(found) > 20 else ""
    return (
        '<div class="note bad" id="corrupt">'
        f"<b>{len(found)} stored record(s) do not read back as events</b> and are left out "
        f"of this page (changed outside the ledger, or damaged):<ul>{shown}{more}</ul></div>"
    )
