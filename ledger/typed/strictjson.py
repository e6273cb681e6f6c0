"""Reading JSON and YAML that a user or an agent wrote, strictly: a key twice is refused.

``json.loads`` and ``yaml.safe_load`` keep the last of two equal keys, so a hand-edited
artifact could say one thing to a reviewer and another to the ledger. Every file the typed
layer reads on the write path (transaction artifacts, compaction plans, schema files,
``--where`` predicates, the ``tools.ledger`` configuration) goes through here. Shard lines
on replay do not: they are evidence, read as the reference reads them.

>>> loads_strict('{"a": 1}')
{'a': 1}
>>> loads_strict('{"a": 1, "a": 2}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ledger.typed.strictjson.DuplicateKeyError: duplicate key "a" in a JSON object (each key ...
"""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["DuplicateKeyError", "StrictYAMLLoader", "load_yaml_strict", "loads_strict"]


class DuplicateKeyError(ValueError):
    """A JSON object with the same key twice."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            shown = json.dumps(key, ensure_ascii=False)
            raise DuplicateKeyError(
                f"duplicate key {shown} in a JSON object (each key may appear once)"
            )
        result[key] = value
    return result


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` refusing duplicate keys (:class:`DuplicateKeyError`) and NaN or
    Infinity (``ValueError``)."""
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)


class StrictYAMLLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping key given twice, at its line."""


def _construct_mapping(
    loader: StrictYAMLLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:  # the node's own keys; merged (<<) keys may be overridden
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the default constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (each key may appear once)",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


StrictYAMLLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def load_yaml_strict(text: str) -> Any:
    """``yaml.safe_load`` refusing duplicate mapping keys (a ``yaml.MarkedYAMLError``)."""
    return yaml.load(text, Loader=StrictYAMLLoader)
