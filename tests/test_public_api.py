"""The public surface, frozen: each facade's ``__all__`` as a sorted snapshot, every name
importable, and leaf modules exporting only what they define.

A change to a snapshot is a change to the public API: say why in CHANGELOG.md.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import ledger

SNAPSHOTS: dict[str, list[str]] = {
    "ledger": [
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
        "REDACTED",
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
    ],
    "ledger.model": [
        "Actor",
        "Approval",
        "Event",
        "Kind",
        "MAX_NESTING",
        "Ref",
        "RefSource",
        "Verdict",
        "new_event_id",
    ],
    "ledger.chain": [
        "Action",
        "Anomaly",
        "AnomalyCode",
        "Chain",
        "Explanation",
        "assemble_chain",
    ],
    "ledger.sinks": [
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
    ],
    "ledger.gate": [
        "AllowAll",
        "AllowList",
        "Approver",
        "Decision",
        "DenyNonSafe",
        "Gate",
        "Policy",
        "REDACTED",
        "Redactor",
        "Run",
        "ToolCall",
        "ToolDenied",
        "content_ref",
        "no_redaction",
        "redact_secrets",
        "redact_text",
    ],
    "ledger.report": [
        "ComplianceReport",
        "Denial",
        "Finding",
        "TimeBucket",
        "ToolStats",
        "build_report",
    ],
    "ledger.typed": [
        "CompactionOutcome",
        "CompactionPolicy",
        "ConfigError",
        "Diagnostic",
        "GitShardStore",
        "IntentQueue",
        "LedgerConfig",
        "LedgerDef",
        "LedgerQueryTool",
        "LedgerResolver",
        "LedgerStore",
        "OperationError",
        "PersistError",
        "ProjectionFailed",
        "QueryError",
        "QueryPage",
        "Reconstruction",
        "Record",
        "RecordError",
        "ReplayError",
        "ReplayResult",
        "ShardStore",
        "StoreError",
        "ToolDefinition",
        "apply_compaction",
        "build_projection",
        "canonical_json",
        "final_id",
        "normalize_appends",
        "open_store",
        "parse_config",
        "persist",
        "plan_compaction",
        "query_records",
        "query_sql",
        "read_artifact",
        "record_ref",
        "record_sha",
        "replay",
        "replay_order",
        "tool_definitions",
        "validate_operation",
        "write_artifact",
    ],
    "ledger.canonical": [
        "CanonicalizationError",
        "GHAW_MAX_DEPTH",
        "MAX_SAFE_INTEGER",
        "PROFILES",
        "Profile",
        "canonical_bytes",
        "canonicalize",
        "format_number",
        "loads_exact",
        "sha256_hex",
        "sha256_of",
    ],
    "ledger.integrity": [
        "Bundle",
        "Checkpoint",
        "CheckpointBody",
        "Cosignature",
        "CosignatureSigner",
        "CosignatureVerifier",
        "EMPTY_ROOT",
        "Finding",
        "FindingKind",
        "Frontier",
        "HASH_SIZE",
        "InclusionProof",
        "IntegrityError",
        "JSONLLeaves",
        "LeafRow",
        "LeafSource",
        "MemoryTree",
        "Node",
        "NodeHashes",
        "NodeLookup",
        "NoteSignature",
        "NoteSigner",
        "NoteVerifier",
        "OpenedNote",
        "Signer",
        "SubtreeHashes",
        "TreeHead",
        "Verifier",
        "VerifyResult",
        "add_signature_lines",
        "checkpoint_body",
        "consistency_nodes",
        "consistency_path",
        "consistency_proof_size",
        "cosigned_message",
        "generate_key",
        "generate_witness_key",
        "inclusion_nodes",
        "inclusion_path",
        "inclusion_proof_size",
        "key_id",
        "leaf_hash",
        "make_bundle",
        "node_hash",
        "open_note",
        "parse_checkpoint_body",
        "parse_signatures",
        "root_from_nodes",
        "root_hash",
        "root_nodes",
        "sign_note",
        "subtree_from_nodes",
        "verify_bundle",
        "verify_consistency",
        "verify_cosignature",
        "verify_inclusion",
        "verify_ledger",
    ],
    "ledger.drift": [
        "ErasedContent",
        "EventResolver",
        "RefCheck",
        "RefState",
        "Resolver",
        "SealedContent",
        "StaticResolver",
        "chain_refs",
        "content_hash",
        "verify_refs",
    ],
    "ledger.errors": [
        "CallNotFound",
        "CanonicalizationError",
        "ConfigError",
        "CorruptRecord",
        "DuplicateEvent",
        "EventNotFound",
        "IntegrityError",
        "LedgerError",
        "NotSelfExplaining",
        "PayloadKeyError",
        "PersistError",
        "QueryError",
        "RecordError",
        "ReplayError",
        "RetentionError",
        "SchemaVersionError",
        "SinkClosed",
        "StorageError",
        "ToolDenied",
        "TypedLedgerError",
        "ValidationError",
    ],
    "ledger.viewer": [
        "Viewer",
        "is_loopback",
        "serve",
    ],
    "ledger.cli": [
        "cli",
        "main",
    ],
}

PUBLIC_MODULES = {
    # modules users import by path (DESIGN.md); they may re-export what they document
    "ledger.canonical",
    "ledger.drift",
    "ledger.errors",
    "ledger.demo",
}


def _snapshot(name: str) -> list[str]:
    return sorted(importlib.import_module(name).__all__)


@pytest.mark.parametrize("facade", sorted(SNAPSHOTS))
def test_each_facade_exports_exactly_its_snapshot(facade: str) -> None:
    assert _snapshot(facade) == SNAPSHOTS[facade]


@pytest.mark.parametrize("facade", sorted(SNAPSHOTS))
def test_every_exported_name_is_there(facade: str) -> None:
    module = importlib.import_module(facade)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []
    assert module.__all__ == sorted(module.__all__) or len(set(module.__all__)) == len(
        module.__all__
    )


def _leaf_modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(ledger.__path__, "ledger."):
        if info.ispkg or info.name.startswith("ledger.adapters") or info.name in PUBLIC_MODULES:
            continue
        found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", _leaf_modules())
def test_leaf_modules_export_only_what_they_define(name: str) -> None:
    module = importlib.import_module(name)
    borrowed = []
    for export in getattr(module, "__all__", ()):
        value = getattr(module, export)
        owner = getattr(value, "__module__", name)
        if (inspect.isclass(value) or inspect.isfunction(value)) and owner != name:
            borrowed.append(f"{export} (from {owner})")
    assert borrowed == [], f"{name} re-exports {borrowed}; import them from where they live"


def test_import_ledger_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ledger, ledger.sinks, ledger.model, ledger.chain, ledger.gate\n"
        "heavy = ('sqlalchemy', 'alembic', 'psycopg', 'yaml', 'click', 'rich', 'mcp',\n"
        "         'opentelemetry', 'langgraph', 'pydantic_ai', 'agents', 'cryptography')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
