"""The tamper-evident log's status (``/integrity``).

Where the ledger keeps a Merkle log (the SQL sinks with the log's tables) the page runs
``ledger.integrity.verify.verify_ledger`` over it when opened: every row's leaf is
recomputed and the tree rebuilt, so the cost is one pass over the whole ledger. The
stored checkpoints' roots are compared; their signatures are not checked here (the
viewer holds no trusted keys). A ledger without such a log (a JSONL file, or code
without the verifier) is shown as having no tamper-evident log.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from ledger.errors import LedgerError
from ledger.sinks.base import Reader
from ledger.viewer.html import badge, esc, href, link, table, value
from ledger.viewer.routing import Context, Request, Response, html_response

__all__ = ["IntegrityStatus", "integrity_page", "integrity_status"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class IntegrityStatus:
    """``state`` is ``verified``, ``failed``, ``none`` (no tamper-evident log) or
    ``error`` (the log could not be read); ``summary`` one line; ``findings`` dicts."""

    state: str
    summary: str
    findings: tuple[dict[str, Any], ...] = field(default=())
    facts: tuple[tuple[str, str], ...] = field(default=())


def _module() -> Any:
    try:
        return importlib.import_module("ledger.integrity.verify")
    except ImportError:
        return None


def _verifier() -> tuple[Any, Any] | None:
    module = _module()
    verify, source = getattr(module, "verify_ledger", None), getattr(module, "LeafSource", None)
    return (verify, source) if callable(verify) and source is not None else None


def _keyless(reader: Reader) -> tuple[bool, Any]:
    """``(True, result)`` from ``verify_stored`` (the keyless check ``ledger report``
    makes; ``result`` None when the reader keeps no log), ``(False, None)`` without it."""
    stored = getattr(_module(), "verify_stored", None)
    if not callable(stored):
        return False, None
    return True, stored(reader)


def integrity_status(reader: Reader) -> IntegrityStatus:
    """Verify the ledger's tamper-evident log, if it has one."""
    found = _verifier()
    if found is None:
        return IntegrityStatus(
            state="none", summary="no tamper-evident log: this version cannot verify one"
        )
    verify, leaf_source = found
    stored = getattr(reader, "stored_head", None)
    if not isinstance(reader, leaf_source) or not callable(stored):
        return IntegrityStatus(
            state="none",
            summary=f"no tamper-evident log: a {type(reader).__name__} keeps none "
            "(only the SQL sinks do)",
        )
    try:
        known, found_result = _keyless(reader)
        if known and found_result is None:
            return IntegrityStatus(
                state="none", summary="no tamper-evident log: the ledger stores no tree head"
            )
        if known:
            return _status(found_result)
        if stored() is None:
            return IntegrityStatus(
                state="none", summary="no tamper-evident log: the ledger stores no tree head"
            )
        result = verify(reader, None)
    except LedgerError as exc:
        log.warning("integrity: %s", exc)
        return IntegrityStatus(state="error", summary=f"the log could not be read: {exc}")
    except Exception as exc:  # the verifier itself failed: say so, keep the page
        log.exception("integrity verification failed")
        return IntegrityStatus(
            state="error",
            summary=f"verification did not complete ({type(exc).__name__}); see the server log",
        )
    return _status(result)


def _status(result: Any) -> IntegrityStatus:
    d = result.to_dict()
    facts = tuple(
        (k.replace("_", " "), str(d[k]))
        for k in ("origin", "size", "rows", "root", "covered")
        if k in d and d[k] is not None
    )
    return IntegrityStatus(
        state="verified" if result.ok else "failed",
        summary=result.summary(),
        findings=tuple(d.get("findings", ())),
        facts=facts,
    )


def integrity_page(request: Request, ctx: Context) -> Response:
    """The integrity page."""
    reader = ctx.reader
    assert isinstance(reader, Reader)
    status = integrity_status(reader)
    kind = {"verified": "ok", "failed": "bad", "error": "bad"}.get(status.state, "info")
    word = {"verified": "intact", "failed": "tampered", "error": "unreadable", "none": "no log"}
    facts = "".join(f"<dt>{esc(k)}</dt><dd>{value(v, limit=120)}</dd>" for k, v in status.facts)
    rows = [
        (
            badge(f.get("severity", ""), "bad" if f.get("severity") == "error" else "warn"),
            esc(f.get("kind", "")),
            esc(f.get("message", "")),
            link(href("/event", id=f["event_id"]), f["event_id"], css="mono")
            if f.get("event_id")
            else esc(f.get("seq", "")),
        )
        for f in status.findings
    ]
    body = (
        f'<div class="crumbs">{link("/", "Runs")} / integrity</div>'
        '<h1 id="title">Integrity</h1>'
        f'<div class="note {kind}" id="integrity-status" data-state="{esc(status.state)}">'
        f"{badge(word[status.state], kind)} {esc(status.summary)}</div>"
        + (f'<div class="card"><dl class="kv">{facts}</dl></div>' if facts else "")
        + (
            '<p class="small muted">Every row\'s leaf was recomputed and the tree rebuilt; '
            "stored checkpoints' roots were compared, their signatures were not checked "
            "(the viewer holds no trusted keys).</p>"
            if status.state in ("verified", "failed")
            else ""
        )
        + (
            "<h2>Findings</h2>"
            + table(
                ("severity", "kind", "message", "row"),
                rows,
                empty="None.",
                id_="integrity-findings",
                cell_css=("", "t", "", "id"),
            )
            if status.findings
            else ""
        )
    )
    return html_response(200, "Integrity", body, ctx, here="integrity")
