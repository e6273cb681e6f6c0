"""The gate: no durable record, no action.

>>> from ledger.gate import Gate, AllowAll
>>> from ledger.sinks import DiscardSink
>>> gate = Gate(DiscardSink(), policy=AllowAll())

See :class:`ledger.gate.gate.Gate` for the rules it enforces.
"""

from __future__ import annotations

from ledger.errors import ToolDenied
from ledger.gate.gate import Gate
from ledger.gate.policy import (
    AllowAll,
    AllowList,
    Approver,
    Decision,
    DenyNonSafe,
    Policy,
    ToolCall,
)
from ledger.gate.redact import REDACTED, Redactor, no_redaction, redact_secrets, redact_text
from ledger.gate.run import Run, content_ref

__all__ = [
    "REDACTED",
    "AllowAll",
    "AllowList",
    "Approver",
    "Decision",
    "DenyNonSafe",
    "Gate",
    "Policy",
    "Redactor",
    "Run",
    "ToolCall",
    "ToolDenied",
    "content_ref",
    "no_redaction",
    "redact_secrets",
    "redact_text",
]
