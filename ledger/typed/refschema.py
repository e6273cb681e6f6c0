"""The reference engine's value-schema check, as replay must apply it (faithful on read).

The reference compiles a ledger's schema with a full JSON Schema compiler, but replay and
persistence check values with a small *subset* validator. So a history that the reference
accepted may hold values that full Draft 2020-12 would refuse (a ``minimum``, a
``pattern``, a ``const``, anything under ``allOf``...). Replaying such a history must give
the reference's rows, so :func:`reference_error` reproduces that subset exactly:

- ``oneOf`` (exactly one must match) and ``anyOf`` (one must match); when present, the
  node's other keywords are not looked at;
- ``type`` (a name or a list; ``integer`` is any integral number; unknown names match);
- ``enum`` compared with JavaScript's ``Object.is``, so an object or array never matches
  (not even an equal one), ``1`` is not ``true`` and ``0`` is not ``-0``;
- ``maxLength`` in code points;
- ``required``, ``properties`` and ``additionalProperties: false`` with JavaScript's ``in``
  operator, which also sees ``Object.prototype``'s names (``required: ["toString"]`` holds
  for any object, and a key named ``constructor`` passes ``additionalProperties: false``);
- ``items`` (one schema for every element).

Every other keyword is not enforced there; :func:`ignored_keywords` lists the ones a
schema uses, which ``ledger typed check`` reports. What this library *writes* is still
checked against the full Draft 2020-12 schema (strict on write).

>>> reference_error(5, {"type": "integer", "minimum": 10}) is None   # minimum: not enforced
True
>>> reference_error({"a": 1}, {"enum": [{"a": 1}]})
'(root) must be one of: [object Object]'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ENFORCED_KEYWORDS", "ignored_keywords", "reference_error"]

ENFORCED_KEYWORDS: Final = frozenset(
    {
        "oneOf",
        "anyOf",
        "type",
        "enum",
        "maxLength",
        "required",
        "properties",
        "additionalProperties",
        "items",
    }
)
# keywords that only annotate (they never make a value invalid in any validator)
_ANNOTATIONS: Final = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentMediaType",
        "contentEncoding",
        "$defs",
        "definitions",
    }
)
# the names `in` finds on every plain JavaScript object (Object.prototype)
_PROTOTYPE: Final = frozenset(
    {
        "constructor",
        "__defineGetter__",
        "__defineSetter__",
        "hasOwnProperty",
        "__lookupGetter__",
        "__lookupSetter__",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toString",
        "valueOf",
        "__proto__",
        "toLocaleString",
    }
)
_INDEX: Final = re.compile(r"0|[1-9][0-9]*")


class _JSFunction:
    """What ``value[key]`` is in JavaScript for an inherited method name."""


_FUNCTION = _JSFunction()


def _is_object(value: object) -> bool:
    return isinstance(value, dict)


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _type_matches(value: object, expected: object) -> bool:
    if expected == "object":
        return _is_object(value)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    number = value if type(value) in (int, float) else None
    if expected == "number":
        return isinstance(number, int | float) and math.isfinite(number)
    if expected == "integer":
        return isinstance(number, int | float) and math.isfinite(number) and number == int(number)
    if expected == "boolean":
        return type(value) is bool
    if expected == "null":
        return value is None
    return True  # an unknown type name matches (the switch's default)


def _object_is(a: object, b: object) -> bool:
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False  # identity: two parsed values are never the same object
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        x, y = float(a), float(b)  # type: ignore[arg-type]
        if math.isnan(x) and math.isnan(y):
            return True
        return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and a == b


def _js_string(value: object) -> str:
    """``String(value)`` (as ``in`` and ``Array.prototype.join`` convert)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if _is_number(value):
        from ledger.typed.jsontext import canonical_json  # JavaScript number formatting

        return canonical_json(value)
    if isinstance(value, list):
        return ",".join("" if v is None else _js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_in(key: object, obj: Mapping[str, Any]) -> bool:
    name = _js_string(key)
    return name in obj or name in _PROTOTYPE


def _js_get(obj: Mapping[str, Any], key: str) -> Any:
    if key in obj:
        return obj[key]
    return {} if key == "__proto__" else _FUNCTION  # Object.prototype, or a method


def _js_keys(obj: Mapping[str, Any]) -> list[str]:
    """``Object.keys``: array-index names first, ascending, then insertion order."""
    index = sorted((k for k in obj if _INDEX.fullmatch(k) and int(k) < 2**32 - 1), key=int)
    taken = set(index)
    return index + [k for k in obj if k not in taken]


def _path(base: str, key: object) -> str:
    if not base:  # formatPath returns the key itself; a number 0 is as falsy as ""
        return "" if _is_number(key) and key == 0 else _js_string(key)
    if _is_number(key):
        return f"{base}[{_js_string(key)}]"
    return f"{base}.{_js_string(key)}"


def _node(value: object, schema: object, path: str) -> tuple[str, str] | None:
    if not isinstance(schema, dict):
        return None
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        errors = [e for e in (_node(value, s, path) for s in one_of) if e is not None]
        if len(one_of) - len(errors) != 1:
            if errors:
                return sorted(errors, key=lambda e: -len(e[0]))[0]
            return path, "must match exactly one schema option"
        return None
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of:
        errors = []
        for sub in any_of:
            error = _node(value, sub, path)
            if error is None:
                return None
            errors.append(error)
        return sorted(errors, key=lambda e: -len(e[0]))[0]
    kind = schema.get("type")
    if kind not in (None, False, 0, ""):  # JavaScript truthiness
        allowed = kind if isinstance(kind, list) else [kind]
        if not any(_type_matches(value, t) for t in allowed):
            names = [_js_string(t) for t in allowed]
            shown = f"a {names[0]}" if len(names) == 1 else f"one of: {', '.join(names)}"
            return path, f"must be {shown}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not any(_object_is(c, value) for c in enum):
        shown = ", ".join("" if c is None else _js_string(c) for c in enum)
        return path, f"must be one of: {shown}"
    limit = schema.get("maxLength")
    if isinstance(value, str) and isinstance(limit, int | float) and type(limit) is not bool:
        length = len(
            value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        )
        if length > limit:
            return path, f"must be at most {_js_string(limit)} characters"
    if _is_object(value):
        assert isinstance(value, dict)
        required = schema.get("required")
        for field in required if isinstance(required, list) else []:
            if not _js_in(field, value):
                return _path(path, field), "is required"
        properties = schema.get("properties")
        props: dict[str, Any] = properties if isinstance(properties, dict) else {}
        if schema.get("additionalProperties") is False:
            for key in _js_keys(value):
                if not _js_in(key, props):
                    return _path(path, key), "is not allowed by the schema"
        for key in _js_keys(props):
            if not _js_in(key, value):
                continue
            error = _node(_js_get(value, key), props[key], _path(path, key))
            if error is not None:
                return error
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):  # a list of schemas checks nothing
        for index, item in enumerate(value):
            error = _node(item, items, _path(path, index))
            if error is not None:
                return error
    return None


def reference_error(value: object, schema: object) -> str | None:
    """``None`` when the reference's subset validator accepts ``value``, else
    ``"<path|(root)> <message>"`` exactly as the reference words it."""
    error = _node(value, schema, "")
    if error is None:
        return None
    path, message = error
    return f"{path or '(root)'} {message}"


def ignored_keywords(schema: object) -> list[str]:
    """The validation keywords of ``schema`` (at any depth) that the reference's subset
    validator does not enforce, sorted; annotations (``title``, ``description``...) are
    not listed, and ``additionalProperties`` only when it is a schema, not ``false``."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        for key, sub in node.items():
            if key == "properties" and isinstance(sub, dict):
                for child in sub.values():
                    walk(child)
                continue
            enforced = key in ENFORCED_KEYWORDS and not (
                key == "additionalProperties" and sub is not False
            )
            if not enforced and key not in _ANNOTATIONS:
                found.add(key)
            if isinstance(sub, dict | list) and key not in ("enum", "required", "const"):
                walk(sub)

    walk(schema)
    return sorted(found)
