"""Provenance sinks: where events go, and the readers that bring them back.

>>> from ledger.sinks import open_sink, DurableSink
>>> with open_sink("sqlite:///ledger.db") as sink:            # doctest: +SKIP
...     sink.commit_action(action_event)                        # durable before it returns
...     chain = sink.chain(action_event.run_id)

Plain sinks: :class:`DiscardSink`, :class:`JSONLSink` (read back with :func:`read_jsonl`
or :class:`JSONLReader`). Durable sinks and readers: :class:`SQLiteSink`,
:class:`PostgresSink`. :class:`MemoryReader` reads events held in memory. URLs:
:func:`parse_url`, :func:`open_sink`, :func:`open_reader`, :func:`upgrade`. The SQL sinks
are imported lazily, so using a JSONL sink does not load SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ledger.sinks.base import DurableSink, Reader, RunSummary, Sink, validate_action
from ledger.sinks.copy import CopyResult, copy_ledger
from ledger.sinks.discard import DiscardSink
from ledger.sinks.jsonl import JSONLContents, JSONLReader, JSONLSink, read_jsonl
from ledger.sinks.memory import MemoryReader
from ledger.sinks.opening import open_reader, open_sink, upgrade
from ledger.sinks.url import LedgerURL, parse_url

if TYPE_CHECKING:
    from ledger.sinks.postgres import PostgresSink
    from ledger.sinks.shred import FileKeyWrapper, KeyWrapper
    from ledger.sinks.sqlite import SQLiteSink

__all__ = [
    "CopyResult",
    "DiscardSink",
    "DurableSink",
    "FileKeyWrapper",
    "JSONLContents",
    "JSONLReader",
    "JSONLSink",
    "KeyWrapper",
    "LedgerURL",
    "MemoryReader",
    "PostgresSink",
    "Reader",
    "RunSummary",
    "SQLiteSink",
    "Sink",
    "copy_ledger",
    "open_reader",
    "open_sink",
    "parse_url",
    "read_jsonl",
    "upgrade",
    "validate_action",
]

_LAZY = {
    "SQLiteSink": "ledger.sinks.sqlite",
    "PostgresSink": "ledger.sinks.postgres",
    "FileKeyWrapper": "ledger.sinks.shred",
    "KeyWrapper": "ledger.sinks.shred",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.sinks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
