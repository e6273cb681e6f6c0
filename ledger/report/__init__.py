"""The compliance report over a window of a ledger.

>>> from ledger.report import build_report
>>> from ledger.sinks import MemoryReader
>>> build_report(MemoryReader([])).events
0

:mod:`ledger.report.model` holds the report's values, :mod:`ledger.report.build` builds
it, :mod:`ledger.report.render` renders CSV and HTML.
"""

from __future__ import annotations

from ledger.report.build import build_report
from ledger.report.document import ComplianceReport
from ledger.report.model import Denial, Finding, TimeBucket, ToolStats

__all__ = ["ComplianceReport", "Denial", "Finding", "TimeBucket", "ToolStats", "build_report"]
