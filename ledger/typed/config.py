"""The ``tools.ledger`` configuration: both forms, every key and bound of the reference.

::

    config = parse_config({"findings": {"type": "table", "key": "id"},
                           "metrics": {"type": "counter"}})
    config["findings"].key                     # "id"
    [d.name for d in config.ledgers]           # ["findings", "metrics"] (sorted)
    parse_config("schema: {type: string}\\ntype: log").ledgers[0].name   # "default"

Schemas given as paths are resolved from the repository root, found by walking up from
``base_dir`` (default: the current directory) to the directory holding ``.git``.
Every error is a :class:`~ledger.errors.ConfigError` worded as the reference's.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from ledger.errors import ConfigError
from ledger.typed.schema import check_schema, load_schema_file
from ledger.typed.strictjson import load_yaml_strict

__all__ = [
    "BUILTIN_TYPES",
    "CompactionPolicy",
    "LedgerConfig",
    "LedgerDef",
    "UnknownLedger",
    "check_ledger_name",
    "parse_config",
    "parse_serialized_config",
]

BUILTIN_TYPES: Final = ("log", "set", "map", "table", "counter", "notes")
NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
KEY_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
MAX_SERIALIZED_CHARS: Final = 96 * 1024
REPLAY_REMOVED: Final = "Custom ledger replay is no longer supported; use a built-in ledger type"
_SINGLE_KEYS: Final = frozenset(
    {"schema", "max-record-kb", "max-segment-kb", "max-patch-kb", "type", "key"}
)
_COMPACTION_KEYS: Final = ("schedule", "min-segments", "max-segments", "script")
_LEDGER_KEYS: Final = _SINGLE_KEYS | {"compaction", "replay"}


class UnknownLedger(ConfigError, KeyError):
    """``config[name]`` named no configured ledger."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """Maintenance compaction settings; ``enabled=False`` when ``compaction: false``."""

    enabled: bool = True
    schedule: str = "daily"
    min_segments: int = 32
    max_segments: int = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerDef:
    """One configured ledger. ``type`` is ``None`` for a raw (untyped) ledger.

    ``schema`` is the value schema, already resolved to an inline mapping when it was
    given as a path.
    """

    name: str
    type: str | None = None
    key: str | None = None
    schema: Mapping[str, Any] | None = None
    max_record_kb: int = 32
    max_segment_kb: int = 100
    max_patch_kb: int = 10
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)

    @property
    def branch_name(self) -> str:
        """The reference's git branch for this ledger, ``ledgers/<name>``."""
        return f"ledgers/{self.name}"

    @property
    def max_segment_bytes(self) -> int:
        """The largest shard file, in bytes."""
        return self.max_segment_kb * 1024

    def serialized(self) -> dict[str, Any]:
        """The entry of the serialized configuration (no compaction policy, as upstream)."""
        entry: dict[str, Any] = {"name": self.name}
        if self.type:
            entry["type"] = self.type
        if self.key:
            entry["key"] = self.key
        if self.schema is not None:
            entry["schema"] = self.schema
        entry["max_record_kb"] = self.max_record_kb
        entry["max_segment_kb"] = self.max_segment_kb
        entry["max_patch_kb"] = self.max_patch_kb
        entry["branch_name"] = self.branch_name
        return entry


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """Every configured ledger, sorted by name; ``config[name]`` looks one up."""

    ledgers: tuple[LedgerDef, ...]

    def __getitem__(self, name: str) -> LedgerDef:
        for ledger in self.ledgers:
            if ledger.name == name:
                return ledger
        raise UnknownLedger(f"no ledger named {name!r} is configured (have: {self.names})")

    def __iter__(self) -> Iterator[LedgerDef]:
        return iter(self.ledgers)

    def __len__(self) -> int:
        return len(self.ledgers)

    def __contains__(self, name: object) -> bool:
        return any(ledger.name == name for ledger in self.ledgers)

    @property
    def names(self) -> tuple[str, ...]:
        """The ledger names, sorted."""
        return tuple(ledger.name for ledger in self.ledgers)

    def serialized_base64(self) -> str:
        """``GH_AW_LEDGER_CONFIG_BASE64``: the base64 of the JSON array of ledgers.

        Raises :class:`ConfigError` when it exceeds 98,304 characters.
        """
        try:
            text = json.dumps(
                [ledger.serialized() for ledger in self.ledgers],
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"failed to serialize ledger configuration: {exc}") from None
        for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escape)  # Go's encoder escapes these
        encoded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
        if len(encoded) > MAX_SERIALIZED_CHARS:
            raise ConfigError(
                "serialized ledger configuration exceeds the 98304-byte environment limit "
                f"({len(encoded)} characters after base64); shrink or split the schemas",
            )
        return encoded


def parse_serialized_config(encoded: str) -> LedgerConfig:
    """Read ``GH_AW_LEDGER_CONFIG_BASE64`` back, with the reference's runtime re-checks.

    >>> parse_serialized_config(parse_config({"h": {"type": "log"}}).serialized_base64())
    ... # doctest: +SKIP

    Bad base64 or JSON raises ``Invalid trusted ledger configuration``; a bad entry
    ``Invalid trusted ledger definition``; a ``replay`` key the replay-removed error.
    """
    try:
        entries = json.loads(base64.b64decode(encoded, validate=True))
    except ValueError:
        raise ConfigError("Invalid trusted ledger configuration: not base64 JSON") from None
    if not isinstance(entries, list):
        raise ConfigError("Invalid trusted ledger configuration: expected a JSON array")
    ledgers: dict[str, LedgerDef] = {}
    for entry in entries:
        ledger = _trusted_entry(entry)
        if ledger.name in ledgers:
            raise ConfigError(f"Invalid trusted ledger definition: duplicate name {ledger.name!r}")
        ledgers[ledger.name] = ledger
    return LedgerConfig(tuple(sorted(ledgers.values(), key=lambda ledger: ledger.name)))


def _trusted_entry(entry: object) -> LedgerDef:
    if isinstance(entry, Mapping) and "replay" in entry:
        raise ConfigError(REPLAY_REMOVED)
    bad = ConfigError(f"Invalid trusted ledger definition: {entry!r:.200}")
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise bad
    name, record, segment, patch = (
        entry["name"],
        entry.get("max_record_kb"),
        entry.get("max_segment_kb"),
        entry.get("max_patch_kb"),
    )
    limits = [_whole(value) for value in (record, segment, patch)]
    if NAME_RE.fullmatch(name) is None or None in limits:
        raise bad
    record_kb, segment_kb, patch_kb = (int(value or 0) for value in limits)
    if not (1 <= record_kb <= 32 and record_kb <= segment_kb <= 10240 and 1 <= patch_kb <= 10240):
        raise bad
    ledger_type, key = entry.get("type"), entry.get("key")
    if ledger_type is not None and ledger_type not in BUILTIN_TYPES:
        raise bad
    key_ok = isinstance(key, str) and KEY_RE.fullmatch(key) is not None
    if key_ok != (ledger_type == "table") and not (key is None and ledger_type != "table"):
        raise bad
    schema = entry.get("schema")
    return LedgerDef(
        name=name,
        type=ledger_type,
        key=entry.get("key"),
        schema=schema if isinstance(schema, Mapping) else None,
        max_record_kb=record_kb,
        max_segment_kb=segment_kb,
        max_patch_kb=patch_kb,
    )


def check_ledger_name(name: object) -> str:
    """Return ``name`` if it is a valid ledger name, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        shown = json.dumps(name) if isinstance(name, str) else repr(name)
        raise ConfigError(
            f"tools.ledger name {shown} must contain only letters, numbers, hyphens, "
            "and underscores (1..64 characters, starting with a letter or number)",
        )
    return name


def parse_config(
    source: Mapping[str, Any] | str | None, *, base_dir: str | os.PathLike[str] | None = None
) -> LedgerConfig:
    """Parse the ``tools.ledger`` value (a mapping, or its YAML text) into a config.

    ``base_dir`` is where the search for the repository root starts when a schema is a
    path (default: the current directory). The serialized size limit is checked too.
    """
    text = isinstance(source, str | os.PathLike)
    if isinstance(source, str):
        try:
            source = load_yaml_strict(source)
        except yaml.YAMLError as exc:
            raise ConfigError(f"tools.ledger is not valid YAML: {exc}") from None
    if source is None:
        source = {}
    if not isinstance(source, Mapping):
        hint = " (pass the YAML text or a mapping, not a file name)" if text else ""
        raise ConfigError(f"tools.ledger must be an object{hint}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    if _is_single_form(source):
        ledgers = [_parse_ledger("default", source, base, "tools.ledger")]
    else:
        ledgers = [_parse_named(name, value, base) for name, value in source.items()]
    config = LedgerConfig(tuple(sorted(ledgers, key=lambda ledger: ledger.name)))
    config.serialized_base64()
    return config


def _is_single_form(source: Mapping[str, Any]) -> bool:
    if not source:
        return True
    if any(_definition_shaped(key, value) for key, value in source.items()):
        return True
    compaction = source.get("compaction")
    if isinstance(compaction, bool) or (
        isinstance(compaction, Mapping) and any(k in compaction for k in _COMPACTION_KEYS)
    ):
        return True
    replay = source.get("replay")
    return isinstance(replay, Mapping) and ("script" in replay or "config" in replay)


def _definition_shaped(key: object, value: object) -> bool:
    """True when a top-level entry reads as a ledger setting rather than a ledger name.

    ``{type: {}, key: {}}`` names two ledgers; ``{type: log}`` is one ledger's setting.
    """
    if key == "schema":
        return isinstance(value, str | Mapping)
    if key in _SINGLE_KEYS:  # a scalar, even a wrong one, is a setting (and its error says so)
        return value is not None and not isinstance(value, Mapping | list)
    return False


def _parse_named(name: object, value: object, base: Path) -> LedgerDef:
    check_ledger_name(name)
    assert isinstance(name, str)
    if not isinstance(value, Mapping):
        raise ConfigError(f"tools.ledger.{name} must be an object")
    return _parse_ledger(name, value, base, f"tools.ledger.{name}")


def _parse_ledger(name: str, raw: Mapping[str, Any], base: Path, where: str) -> LedgerDef:
    for setting in raw:
        if setting not in _LEDGER_KEYS:
            raise ConfigError(f"{where} has unsupported property {json.dumps(str(setting))}")
    if "replay" in raw:
        also = " (and a ledger cannot specify both type and replay)" if "type" in raw else ""
        raise ConfigError(f"{where}.replay: {REPLAY_REMOVED}{also}")
    ledger_type = _parse_type(raw.get("type"), where)
    key = _parse_key(ledger_type, raw.get("key"), where)
    schema = _parse_schema(ledger_type, raw.get("schema"), base, where)
    record_kb = _kb(raw, "max-record-kb", 32, where)
    segment_kb = _kb(raw, "max-segment-kb", 100, where)
    patch_kb = _kb(raw, "max-patch-kb", 10, where)
    if record_kb > 32:
        raise ConfigError(f"{where}.max-record-kb cannot exceed 32")
    if record_kb > segment_kb:
        raise ConfigError(f"{where}.max-record-kb cannot exceed max-segment-kb")
    return LedgerDef(
        name=name,
        type=ledger_type,
        key=key,
        schema=schema,
        max_record_kb=record_kb,
        max_segment_kb=segment_kb,
        max_patch_kb=patch_kb,
        compaction=_parse_compaction(raw.get("compaction", True), where),
    )


def _parse_type(value: object, where: str) -> str | None:
    if value is None:
        return None
    if value not in BUILTIN_TYPES:
        hint = ""
        if value == "claims":
            hint = ' ("claims" was renamed "notes": Unknown built-in ledger type)'
        raise ConfigError(f"{where}.type must be one of: {', '.join(BUILTIN_TYPES)}{hint}")
    assert isinstance(value, str)
    return value


def _parse_key(ledger_type: str | None, value: object, where: str) -> str | None:
    if ledger_type != "table":
        if value is not None:
            raise ConfigError(f"{where}.key is required only for type: table")
        return None
    if value is None:
        raise ConfigError(f"{where}.key is required for type: table (the primary key field)")
    if not isinstance(value, str) or KEY_RE.fullmatch(value) is None:
        raise ConfigError(f"{where}.key must be a valid primary key field")
    return value


def _parse_schema(
    ledger_type: str | None, value: object, base: Path, where: str
) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if ledger_type in ("counter", "notes"):
        raise ConfigError(f"{where}.{ledger_type} does not accept a value schema")
    if isinstance(value, str):
        value = load_schema_file(value, base, f"{where}.schema")
    return check_schema(f"{where}.schema", value)


def _kb(raw: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = raw.get(key, default)
    number = _whole(value)
    if number is None or not 1 <= number <= 10240:
        raise ConfigError(f"{where}.{key} must be a positive integer (1..10240)")
    return number


def _whole(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _parse_compaction(value: object, where: str) -> CompactionPolicy:
    if value is False:
        return CompactionPolicy(enabled=False)
    if value is True or value is None:
        return CompactionPolicy()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}.compaction must be true, false or an object")
    for key in value:
        if key not in _COMPACTION_KEYS:
            raise ConfigError(
                f"{where}.compaction has unsupported property {json.dumps(str(key))} "
                "(supported: schedule, min-segments, max-segments, script)",
            )
    if "script" in value:
        raise ConfigError(
            f"{where}.compaction.script is not supported: compaction is built in and lossless"
        )
    schedule = value.get("schedule", "daily")
    if schedule not in ("daily", "weekly", "manual"):
        raise ConfigError(f"{where}.compaction.schedule must be one of: daily, weekly, manual")
    low = _segments(value, "min-segments", 32, where)
    high = _segments(value, "max-segments", 128, where)
    if "min-segments" in value and "max-segments" not in value:
        high = max(high, low)
    if high < low:
        raise ConfigError(f"{where}.compaction.max-segments cannot be less than min-segments")
    return CompactionPolicy(
        enabled=True, schedule=str(schedule), min_segments=low, max_segments=high
    )


def _segments(value: Mapping[str, Any], key: str, default: int, where: str) -> int:
    number = _whole(value.get(key, default))
    if number is None or not 2 <= number <= 256:
        raise ConfigError(f"{where}.compaction.{key} must be an integer from 2 to 256")
    return number
