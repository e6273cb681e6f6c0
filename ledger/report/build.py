"""The compliance report: a year of decisions, as a library call.

>>> from ledger.report.build import build_report
>>> with open_sink("sqlite:///ledger.db") as reader:           # doctest: +SKIP
...     report = build_report(reader, since=start, until=end)
>>> report.to_dict()["unsafe_without_intent"]["count"]          # doctest: +SKIP
0
>>> Path("report.html").write_text(report.to_html())            # doctest: +SKIP

One pass over ``reader.events(since=, until=)`` (the window is half-open: ``since``
inclusive, ``until`` exclusive, either may be open) gathers:

* runs and their outcomes (from ``reader.runs``), actions per tool, every denial with its
  reason, allowed actions with no recorded result;
* **non-safe actions that ran without a committed intent** (must be zero): a
  ``tool_result`` whose call has no *preceding* allowed ``action`` in its run and that the
  gate did not record as a safe read, as :func:`ledger.chain.parts.unintended_reason`
  decides (the one rule, which chains apply too: ``ledger chain`` flags the same results).
  A result with no gate decision at all, or whose decision is not marked safe, is a
  violation: unclassified means non-safe, as in the reference's fail-safe rule. A result
  without a call id cannot be paired and is counted as a violation too.
* calls cut by the window's edges are settled by reading just the runs concerned again: a
  result whose intent (or safe-read decision) was recorded before ``since`` is not a
  violation, and an intent whose result came at or after ``until`` is not "no result";
* the oldest and newest record held by the store (any run, whole store, not only the
  window);
* a content-hash check of every event in the window: the stored ``sha256:`` hash against
  the RFC 8785 hash recomputed from the stored event JSON (see :mod:`ledger.report.hashes`);
* the tamper-evident log's check: on a SQL ledger the window's rows recomputed and bound
  to the stored tree head and checkpoints (:mod:`ledger.report.logcheck`; ``ledger
  verify`` rebuilds every row), on any other reader that keeps a log the full check.

The listings (runs, denials, approved actions, findings) hold the first
:data:`~ledger.report.listing.MAX_LISTED` of each in time order, beside the count of
each (``report.counts``) and the approved actions counted per approver, tool and policy
(``report.approval_groups``), so a report of a year of a busy fleet stays small.

On a SQL ledger (SQLite, PostgreSQL) the report is computed in the database
(:mod:`ledger.report.aggregate`): the counts, the timeline and the runs by SQL aggregates
(``GROUP BY`` over indexed columns), the per-row checks in one streaming pass over the
window's rows and the per-call rules in one pass over the window's calls run by run,
decoding only the JSON members it needs; memory holds one run's calls and what the
report lists, not the events. Any other reader (JSONL, memory) is read with one pass of
whole events (its per-call state grows with the window). On an intact ledger both give
the same report (``tests/test_report_scale.py`` compares them). On a damaged one the database build
counts what the rows' columns say, and lists every row whose columns disagree with its
JSON or whose JSON does not read back as an event, so the report is not compliant either
way; a row whose JSON names another run than its ``run_id`` column makes it build the
report by the streaming pass instead (its runs cannot be settled by the columns). The
database build's aggregates all read the rows committed when it started (those with a
``seq`` up to the highest then), so a report made while agents commit agrees with
itself.

The result, :class:`ComplianceReport`, renders as a dict (stable field names), CSV and a
self-contained HTML page (:mod:`ledger.report.render`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from ledger.errors import ValidationError
from ledger.integrity.verify import verify_stored
from ledger.model.values import outside_any_run
from ledger.report.calls import CallPass, Tally, look_across, tally_parts
from ledger.report.document import ComplianceReport
from ledger.report.hashes import check_hashes, each_event, with_unreadable
from ledger.report.listing import MAX_LISTED
from ledger.report.retention import retention_section
from ledger.report.timeline import bucket, span_end
from ledger.sinks import Reader
from ledger.sinks.url import shown_url
from ledger.timefmt import check_window, coerce_bound, utc_now

__all__ = ["build_report"]

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
_PROGRESS_EVERY = 5000


def _records_held(reader: Reader) -> tuple[datetime | None, datetime | None]:
    """The oldest and newest event time of any run in the whole store."""
    oldest: datetime | None = None
    newest: datetime | None = None
    for s in reader.runs():
        oldest = s.first_time if oldest is None else min(oldest, s.first_time)
        newest = s.last_time if newest is None else max(newest, s.last_time)
    return oldest, newest


def build_report(
    reader: Reader,
    *,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    progress: Progress | None = None,
    ledger: str = "",
    listed: int = MAX_LISTED,
) -> ComplianceReport:
    """Build the compliance report over ``[since, until)`` from ``reader``; ``ledger``
    names the ledger it covers (its URL; a password in it is never shown). ``since``
    and ``until`` are aware datetimes or RFC 3339 text, as the readers take them
    (``ValidationError`` for a naive or malformed one). Each listing (runs, denials,
    missing results, ...) holds its first ``listed`` items in time order (memory grows
    with it) beside its count; ``ValidationError`` unless it is an integer >= 0.

    ``progress``, when given, is called with the number of events read so far (every few
    thousand events and at the end), for a progress display.
    """
    from ledger.report.aggregate import Restream, in_database, report_in_database

    if type(listed) is not int or listed < 0:
        raise ValidationError(f"listed: expected an integer >= 0, got {listed!r}")
    listed = min(listed, _ALL)  # more than a database can number lists every one
    since = None if since is None else coerce_bound(since, field="since")
    until = None if until is None else coerce_bound(until, field="until")
    check_window(since, until)

    report = None
    if in_database(reader):
        try:
            report = report_in_database(
                reader, since=since, until=until, progress=progress, ledger=ledger, listed=listed
            )
        except Restream as why:
            log.warning("compliance report: streaming every event instead (%s)", why)
    if report is None:
        report = _streamed(
            reader, since=since, until=until, progress=progress, ledger=ledger, listed=listed
        )
        report = replace(report, log_check=verify_stored(reader))
    section = retention_section(reader, since=since, until=until, listed=listed)
    report = replace(report, retention=section)
    log.info("compliance report: %d events, %d runs", report.events, len(report.runs))
    return report


_ALL = 2**62  # beyond any listing's length, and within a SQL LIMIT's 64 bits


def _streamed(
    reader: Reader,
    *,
    since: datetime | None,
    until: datetime | None,
    progress: Progress | None,
    ledger: str,
    listed: int,
) -> ComplianceReport:
    """The report from one pass of whole events (any reader)."""
    state = CallPass(tally=Tally(listed=listed))
    for e in each_event(reader, state.skipped, since=since, until=until):
        state.add(e)
        if progress is not None and state.events % _PROGRESS_EVERY == 0:
            progress(state.events)
    if progress is not None:
        progress(state.events)
    look_across(state, reader, since, until)
    state.finish()
    tally = state.tally
    runs = [r for r in reader.runs(since=since, until=until) if not outside_any_run(r.run_id)]
    oldest, newest = _records_held(reader)
    timeline = bucket(
        state.action_times, state.denial_times, since or state.first, span_end(until, state.last)
    )
    return ComplianceReport(
        generated_at=utc_now(),
        since=since,
        until=until,
        events=state.events,
        runs=tuple(runs[:listed]),
        ledger=shown_url(ledger) if ledger else "",
        oldest_record=oldest,
        newest_record=newest,
        hash_check=with_unreadable(
            check_hashes(reader, since=since, until=until), state.skipped, tally.beyond
        ),
        timeline=timeline,
        **tally_parts(tally, len(runs)),
    )
