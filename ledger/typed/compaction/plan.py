"""A compaction plan as hostile input: its exact shape, its bounds and its id (reference §5.3)::

    plan = read_plan("plan.json")      # a regular, non-symlink file of 1 B..16 MiB
    validate_plan(config, plan)        # raises RejectedPlanError, or returns None
    plan_id(plan) == plan["plan_id"]   # True for a valid plan

``plan_id`` is ``sha256:`` + the SHA-256 of the canonical JSON of ``{version, ledger,
branch, sources: [{segment, sha256}], replacement: {segment, sha256}}``.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from ledger.errors import TypedLedgerError
from ledger.typed.compaction.segments import SEGMENT_RE
from ledger.typed.config import LedgerConfig, LedgerDef
from ledger.typed.jsontext import canonical_json, sha256_hexdigest
from ledger.typed.strictjson import loads_strict

__all__ = ["PLAN_VERSION", "RejectedPlanError", "plan_id", "read_plan", "validate_plan"]

PLAN_VERSION = "gh-aw/ledger-compaction-plan/v1"
MAX_PLAN_BYTES = 16 * 1024 * 1024
MAX_RECORDS = 100_000
PLAN_KEYS = frozenset(
    {
        "version",
        "ledger",
        "branch",
        "trigger",
        "created_at",
        "base_commit",
        "sources",
        "replacement",
        "plan_id",
    }
)
ENTRY_KEYS = frozenset({"segment", "sha256", "bytes", "records"})
_CREATED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?Z")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class RejectedPlanError(TypedLedgerError, ValueError):
    """A compaction plan failed validation; nothing was applied."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Rejected ledger compaction plan: {detail}")


def plan_id(plan: Mapping[str, Any]) -> str:
    """The plan's id, recomputed from its identifying fields."""
    body = {
        "version": plan["version"],
        "ledger": plan["ledger"],
        "branch": plan["branch"],
        "sources": [{"segment": s["segment"], "sha256": s["sha256"]} for s in plan["sources"]],
        "replacement": {
            "segment": plan["replacement"]["segment"],
            "sha256": plan["replacement"]["sha256"],
        },
    }
    return "sha256:" + sha256_hexdigest(canonical_json(body))


def validate_plan(config: LedgerConfig, plan: object) -> None:
    """Check every rule of a plan; raise :class:`RejectedPlanError` naming the first broken."""
    if not isinstance(plan, Mapping) or set(plan) != PLAN_KEYS:
        raise RejectedPlanError(f"a plan has exactly the keys {sorted(PLAN_KEYS)}")
    if plan["version"] != PLAN_VERSION:
        raise RejectedPlanError(f"version must be {PLAN_VERSION!r}")
    ledger = _ledger(config, plan)
    if plan["trigger"] not in ("scheduled", "requested"):
        raise RejectedPlanError("trigger must be 'scheduled' or 'requested'")
    if not isinstance(plan["created_at"], str) or not _CREATED.fullmatch(plan["created_at"]):
        raise RejectedPlanError("created_at must be an ISO UTC time")
    if not isinstance(plan["base_commit"], str) or not _COMMIT.fullmatch(plan["base_commit"]):
        raise RejectedPlanError("base_commit must be 40 or 64 lowercase hex digits")
    sources = _sources(ledger, plan["sources"])
    replacement = plan["replacement"]
    _entry(ledger, replacement, "replacement")
    if replacement["segment"] in {s["segment"] for s in sources}:
        raise RejectedPlanError("the replacement is also a source")
    total = sum(len(s["records"]) for s in sources) + len(replacement["records"])
    if total > MAX_RECORDS:
        raise RejectedPlanError(f"more than {MAX_RECORDS} records")
    covered = {sha for s in sources for sha in s["records"]}
    if not covered <= set(replacement["records"]):
        raise RejectedPlanError("the replacement does not hold every source record")
    if not isinstance(plan["plan_id"], str) or plan_id(plan) != plan["plan_id"]:
        raise RejectedPlanError("plan_id does not match the plan")


def _ledger(config: LedgerConfig, plan: Mapping[str, Any]) -> LedgerDef:
    name = plan["ledger"]
    if not isinstance(name, str) or name not in config:
        raise RejectedPlanError(f"ledger {name!r} is not configured")
    ledger = config[name]
    if plan["branch"] != ledger.branch_name:
        raise RejectedPlanError(f"branch must be {ledger.branch_name!r}")
    if not ledger.compaction.enabled:
        raise RejectedPlanError(f"compaction is disabled for ledger {name!r}")
    return ledger


def _sources(ledger: LedgerDef, sources: object) -> list[Mapping[str, Any]]:
    most = min(ledger.compaction.max_segments, 256)
    if not isinstance(sources, list) or not 1 <= len(sources) <= most:
        raise RejectedPlanError(f"sources must be a list of 1..{most} segments")
    for source in sources:
        _entry(ledger, source, "source")
    names = [s["segment"] for s in sources]
    if any(a >= b for a, b in itertools.pairwise(names)):
        raise RejectedPlanError("sources must be strictly sorted by segment and unique")
    return sources


def _entry(ledger: LedgerDef, entry: object, what: str) -> None:
    if not isinstance(entry, Mapping) or set(entry) != ENTRY_KEYS:
        raise RejectedPlanError(f"a {what} has exactly the keys {sorted(ENTRY_KEYS)}")
    segment, digest, size, records = (entry[k] for k in ("segment", "sha256", "bytes", "records"))
    if not isinstance(segment, str) or not SEGMENT_RE.fullmatch(f"{segment}.jsonl"):
        raise RejectedPlanError(f"{what} segment {segment!r} is not a UUIDv4")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise RejectedPlanError(f"{what} sha256 must be sha256:<64 hex>")
    if type(size) is not int or not 1 <= size <= ledger.max_segment_bytes:
        raise RejectedPlanError(f"{what} bytes must be 1..{ledger.max_segment_bytes}")
    if not isinstance(records, list) or not all(
        isinstance(sha, str) and _DIGEST.fullmatch(sha) for sha in records
    ):
        raise RejectedPlanError(f"{what} records must be sha256 digests")
    if any(a >= b for a, b in itertools.pairwise(records)):
        raise RejectedPlanError(f"{what} records must be strictly sorted and unique")


def read_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a plan file: regular, not a symlink, 1 byte to 16 MiB of UTF-8 JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise RejectedPlanError(f"cannot open the plan file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or not 1 <= info.st_size <= MAX_PLAN_BYTES:
            raise RejectedPlanError("the plan must be a regular file of 1 byte to 16 MiB")
        data = handle.read(MAX_PLAN_BYTES + 1)
    try:
        plan = loads_strict(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RejectedPlanError(f"the plan is not UTF-8 JSON ({exc})") from None
    if not isinstance(plan, dict):
        raise RejectedPlanError("the plan must be a JSON object")
    return plan
