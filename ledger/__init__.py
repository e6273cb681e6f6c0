"""agentledger: the trustworthy record of what AI agents do.

>>> from ledger import Event, Kind, Ref
>>> ev = Event(kind=Kind.REQUEST, run_id="r1", args='"summarize the report"')

The provenance API is re-exported here; sinks live in :mod:`ledger.sinks`, typed ledgers
in :mod:`ledger.typed`.
"""

from __future__ import annotations

from ledger.chain import Action, Anomaly, AnomalyCode, Chain, Explanation, assemble_chain
from ledger.drift import (
    EventResolver,
    RefCheck,
    RefState,
    Resolver,
    StaticResolver,
    content_hash,
    verify_refs,
)
from ledger.errors import (
    CallNotFound,
    CorruptRecord,
    DuplicateEvent,
    EventNotFound,
    IntegrityError,
    LedgerError,
    NotSelfExplaining,
    RunNotFound,
    SchemaVersionError,
    SinkClosed,
    StorageError,
    ToolDenied,
    ValidationError,
)
from ledger.gate import (
    REDACTED,
    AllowAll,
    AllowList,
    Approver,
    Decision,
    DenyNonSafe,
    Gate,
    Policy,
    Redactor,
    Run,
    ToolCall,
    content_ref,
    no_redaction,
    redact_secrets,
    redact_text,
)
from ledger.gate.policy_file import PolicyFileError, policy_from_file
from ledger.ids import new_event_id
from ledger.model import Event, Kind, Ref, RefSource, Verdict

__all__ = [
    "REDACTED",
    "Action",
    "AllowAll",
    "AllowList",
    "Anomaly",
    "AnomalyCode",
    "Approver",
    "CallNotFound",
    "Chain",
    "CorruptRecord",
    "Decision",
    "DenyNonSafe",
    "DuplicateEvent",
    "Event",
    "EventNotFound",
    "EventResolver",
    "Explanation",
    "Gate",
    "IntegrityError",
    "Kind",
    "LedgerError",
    "NotSelfExplaining",
    "Policy",
    "PolicyFileError",
    "Redactor",
    "Ref",
    "RefCheck",
    "RefSource",
    "RefState",
    "Resolver",
    "Run",
    "RunNotFound",
    "SchemaVersionError",
    "SinkClosed",
    "StaticResolver",
    "StorageError",
    "ToolCall",
    "ToolDenied",
    "ValidationError",
    "Verdict",
    "assemble_chain",
    "content_hash",
    "content_ref",
    "new_event_id",
    "no_redaction",
    "policy_from_file",
    "redact_secrets",
    "redact_text",
    "verify_refs",
]
