"""Typed ledgers: canonical records, six built-in types, deterministic replay, projections.

::

    from ledger.typed import parse_config, ShardStore, build_projection

    config = parse_config({"findings": {"type": "table", "key": "id"}})
    store = ShardStore(root)
    store.append("findings", [{"operation": "insert", "value": {"id": "a"}}])
    paths = build_projection(config, store, out_dir)   # {"findings": .../ledger.db}

The on-disk format is the gh-aw reference's, byte for byte, in a folder (``ShardStore``)
or on a repository's ``ledgers/<name>`` branches (``GitShardStore``, as gh-aw keeps them);
``open_store("git+URL")`` picks one from a location string. See docs/typed.md.
"""

from __future__ import annotations

from ledger.errors import ConfigError, PersistError, QueryError, RecordError, ReplayError
from ledger.typed.compaction.apply import CompactionOutcome, apply_compaction, plan_compaction
from ledger.typed.config import CompactionPolicy, LedgerConfig, LedgerDef, parse_config
from ledger.typed.gitstore import GitShardStore
from ledger.typed.intents import IntentQueue
from ledger.typed.jsontext import canonical_json, final_id, record_sha
from ledger.typed.layout import StoreError
from ledger.typed.opening import open_store
from ledger.typed.order import replay_order
from ledger.typed.persist import persist
from ledger.typed.projection import ProjectionFailed, build_projection
from ledger.typed.query import LedgerQueryTool, QueryPage, query_records, query_sql
from ledger.typed.reconstruct import Diagnostic, Reconstruction
from ledger.typed.records import Record
from ledger.typed.reducers.base import OperationError
from ledger.typed.reducers.simple import ReplayResult, replay, validate_operation
from ledger.typed.resolver import LedgerResolver, record_ref
from ledger.typed.storage import LedgerStore
from ledger.typed.store import ShardStore
from ledger.typed.tools import ToolDefinition, tool_definitions
from ledger.typed.transactions import normalize_appends, read_artifact, write_artifact

__all__ = [
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
]
