"""Value schemas: safety checks at configuration time, full Draft 2020-12 at replay time.

The reference enforces only a subset of JSON Schema at runtime (its ``minimum``,
``pattern``, ``minLength``, ``const``... are silently skipped). This module validates
**completely** with ``jsonschema_rs.Draft202012Validator``, compiling each distinct
schema once::

    validator = compile_schema({"type": "object", "required": ["id"]})
    problem = first_error(validator, {"id": "a"})     # None, or "<path|(root)> <message>"

:func:`check_schema` applies the configuration rules (size, depth, no GitHub
expressions, must compile) and raises :class:`~ledger.errors.ConfigError`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import jsonschema_rs

from ledger.canonical import GHAW_MAX_DEPTH
from ledger.errors import CanonicalizationError, ConfigError
from ledger.typed.strictjson import DuplicateKeyError, loads_strict

__all__ = [
    "MAX_SCHEMA_BYTES",
    "check_schema",
    "compile_schema",
    "first_error",
    "load_schema_file",
    "without_surrogates",
]

MAX_SCHEMA_BYTES: Final = 1_048_576
MAX_SCHEMA_DEPTH: Final = GHAW_MAX_DEPTH  # the gh-aw nesting limit, as for records
_SCHEMA_PATH_FORBIDDEN: Final = re.compile(r"[\\${}]")

Validator = jsonschema_rs.Draft202012Validator


def check_schema(where: str, schema: object) -> dict[str, Any]:
    """Refuse a value schema that the reference's compiler would refuse; return it as JSON.

    ``where`` names the setting and ends in ``schema``, e.g.
    ``"tools.ledger.findings.schema"``, so messages read "...schema is too deeply nested"
    as the reference's do. The schema
    returned is plain JSON (YAML's non-string keys became strings, tuples lists).
    """
    if not isinstance(schema, Mapping):
        raise ConfigError(f"{where} must contain a JSON Schema object")
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        schema = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{where} cannot be serialized as JSON: {exc}") from None
    assert isinstance(schema, dict)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
        raise ConfigError(f"{where} exceeds the maximum size of {MAX_SCHEMA_BYTES} bytes")
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise ConfigError(f"{where} is too deeply nested (at most {MAX_SCHEMA_DEPTH} levels)")
    if _has_expression(schema):
        raise ConfigError(f"{where} cannot contain GitHub expressions (remove every '${{{{')")
    try:
        compile_schema(schema)
    except ConfigError as exc:
        raise ConfigError(f"{where} {exc}") from None
    return schema


def load_schema_file(path: str, base: Path, where: str) -> object:
    """Load a schema given as a repository-relative path, found from ``base`` upwards.

    The repository root is the nearest directory holding ``.git``; the path must stay
    inside it (symlinks included) and name a regular file of at most 1 MiB holding a
    JSON object. ``where`` names the setting in error messages.
    """
    parts = path.split("/")
    if (
        not path.strip()
        or path.startswith("/")
        or _SCHEMA_PATH_FORBIDDEN.search(path)
        or ".." in parts
        or re.match(r"[A-Za-z]:", path)
    ):
        raise ConfigError(
            f"{where} must be a repository-relative path without expressions or traversal"
        )
    root = _repository_root(base, where, path)
    try:
        target = (root / path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError) as exc:  # ValueError: not encodable
        raise ConfigError(f"{where} cannot resolve {path!r}: {exc}") from None
    if not target.is_relative_to(root):
        raise ConfigError(f"{where} {path!r} must resolve inside the repository")
    if not target.is_file() or target.stat().st_size > MAX_SCHEMA_BYTES:
        raise ConfigError(
            f"{where} {path!r} must be a regular file no larger than {MAX_SCHEMA_BYTES} bytes"
        )
    try:
        loaded = loads_strict(target.read_text(encoding="utf-8"))
    except DuplicateKeyError as exc:
        raise ConfigError(f"{where} {path!r}: {exc}") from None
    except (ValueError, OSError):
        loaded = None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{where} {path!r} must contain a JSON Schema object")
    return loaded


def _repository_root(base: Path, where: str, path: str) -> Path:
    start = base.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    raise ConfigError(
        f"{where} cannot resolve {path!r}: no repository root (.git) above {start.name!r}"
    )


def _depth(value: object) -> int:
    if isinstance(value, Mapping):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


def _has_expression(value: object) -> bool:
    if isinstance(value, str):
        return "${{" in value
    if isinstance(value, Mapping):
        return any(_has_expression(k) or _has_expression(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_expression(item) for item in value)
    return False


def compile_schema(schema: Mapping[str, Any] | bool) -> Validator:
    """A compiled Draft 2020-12 validator for ``schema`` (cached per distinct schema).

    Raises :class:`ConfigError` ``invalid JSON Schema: …`` when it does not compile.
    """
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise CanonicalizationError(f"schema is not JSON: {exc}") from None
    return _compile(key)


@functools.lru_cache(maxsize=256)
def _compile(key: str) -> Validator:
    schema = json.loads(key)
    try:
        jsonschema_rs.meta.validate(schema)
        return jsonschema_rs.Draft202012Validator(
            schema, validate_formats=False, retriever=_no_remote_references
        )
    except (jsonschema_rs.ValidationError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"invalid JSON Schema: {detail}") from None


def _no_remote_references(uri: str, /) -> dict[str, Any]:
    """Schemas are compiled offline: a ``$ref`` outside the schema is refused."""
    raise ValueError(f"remote schema reference {uri!r} is not allowed; inline it with $defs")


def first_error(validator: Validator, value: object) -> str | None:
    """``None`` when ``value`` is valid, else ``"<path|(root)> <message>"``.

    A lone surrogate (legal in a JavaScript string, so in a ledger record) is validated
    as U+FFFD, which has the same length in code points. A value that is not JSON at all
    raises :class:`~ledger.errors.CanonicalizationError`.
    """
    try:
        return _first_error(validator, value)
    except (ValueError, TypeError):
        pass
    try:
        return _first_error(validator, without_surrogates(value))
    except (ValueError, TypeError, RecursionError) as exc:
        raise CanonicalizationError(f"value cannot be validated as JSON: {exc}") from None


def _first_error(validator: Validator, value: object) -> str | None:
    if validator.is_valid(value):
        return None
    for error in validator.iter_errors(value):
        path = "/" + "/".join(str(part) for part in error.instance_path)
        return f"{path if error.instance_path else '(root)'} {error.message}"
    return "(root) value is invalid"


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: object) -> object:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_surrogates(item) for item in value]
    return value
