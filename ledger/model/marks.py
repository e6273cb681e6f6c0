"""What an event's own fields say of its call, read alike before and after an erasure:
whether a gate decision marked a safe read, and whether a call failed.

An erasure takes a decision's ``label`` and ``reason`` and a result's ``err`` (their
text may hold personal data) but keeps these two facts in the tombstone's ``erased``
member (``marked_safe``, ``had_err``: :mod:`ledger.model.erasure`), so the chain, the
report and the run summaries read an erased run as they read it before.

>>> marks_safe("safe:readers", ""), marks_safe("", "Safe tool: reads only"), marks_safe("ro", "")
(True, True, False)
>>> stated_failed({"err": "timeout"}), stated_failed({"erased": {"had_err": True}})
(True, True)
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["failed", "marked_safe", "marks_safe", "stated_failed"]


def marks_safe(label: str, reason: str) -> bool:
    """True when a gate decision's ``label`` or ``reason`` marks a safe read: label
    ``safe`` or ``safe:<policy>`` (this gate's form), or a reason starting ``safe tool``
    (the reference's wording); all case-insensitive. (Whether it *is* one also takes the
    verdict ``allowed``: :func:`ledger.chain.parts.decision_mark`.)"""
    lowered = label.lower()
    labelled = lowered == "safe" or lowered.startswith("safe:")
    return labelled or reason.lower().startswith("safe tool")


class _Kept(Protocol):
    """What a tombstone's ``erased`` member keeps (``ledger.model.erasure.Erasure``)."""

    @property
    def had_err(self) -> bool | None: ...
    @property
    def marked_safe(self) -> bool | None: ...


class _Recorded(Protocol):
    """The fields these rules read (an ``Event``, or the report's narrow record)."""

    @property
    def label(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def err(self) -> str: ...
    @property
    def erased(self) -> _Kept | None: ...


def marked_safe(event: _Recorded) -> bool:
    """:func:`marks_safe` of a decision, or what its tombstone kept of it when its label
    or reason was erased."""
    gone = event.erased
    if gone is not None and gone.marked_safe is not None:
        return gone.marked_safe
    return marks_safe(event.label, event.reason)


def failed(event: _Recorded) -> bool:
    """True when the event holds an ``err``, or held one before an erasure took it
    (what the ``has_err`` column stores)."""
    if event.err:
        return True
    gone = event.erased
    return gone is not None and gone.had_err is True


def stated_failed(obj: dict[str, Any]) -> bool:
    """:func:`failed` of a stored event's parsed JSON ``obj`` (its ``has_err``)."""
    if obj.get("err"):
        return True
    gone = obj.get("erased")
    return type(gone) is dict and gone.get("had_err") is True
