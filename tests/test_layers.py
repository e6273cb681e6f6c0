"""The package's structure holds: no import cycle, and imports only go down the layers.

Every ``import`` and ``from ... import`` of ``ledger`` modules counts, wherever it stands:
at the top, inside a function, or under ``if TYPE_CHECKING:``. The layers, lowest first
(docs/architecture.md):

    base (errors, ids, timefmt, fsync, canonical) -> model -> chain, drift
    -> sinks, integrity (integrity never imports sinks) -> gate, typed
    -> report, adapters, demo -> cli

A module may import its own layer and the ones below it; two packages of one layer may
not form a cycle (nor may modules inside a package). ``ledger/__init__.py`` is the facade
and is importable by no module of the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "ledger"

LAYERS: dict[str, int] = {
    "errors": 0, "ids": 0, "timefmt": 0, "fsync": 0, "canonical": 0, "_canonical_numbers": 0,
    "model": 1,
    "chain": 2, "drift": 2,
    "sinks": 3, "integrity": 3,  # the SQL sinks keep the Merkle log in their transactions
    "gate": 4, "typed": 4, "retention": 4,
    "report": 5, "adapters": 5, "demo": 5, "viewer": 5,
    "cli": 6, "__main__": 6,
}  # fmt: skip


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = ["ledger", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str:
    """The module ``name`` refers to (a name imported from a module resolves to it)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _package(module: str) -> str:
    """The module that ``from .x import`` is relative to."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for every ledger import in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ledger" or alias.name.startswith("ledger."):
                    yield _resolve(alias.name), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package(module).split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base != "ledger" and not base.startswith("ledger."):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (_resolve(full) if full in MODULES else _resolve(base)), node.lineno


GRAPH: dict[str, set[str]] = {
    m: {target for target, _ in _imports(m) if target != m} for m in MODULES
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if m != "ledger" and _layer(m) is None)
    assert missing == [], f"give these a layer in tests/test_layers.py and the docs: {missing}"


def test_no_import_goes_up_a_layer() -> None:
    wrong = []
    for module in sorted(MODULES):
        mine = _layer(module)
        if mine is None:
            continue
        for target, line in _imports(module):
            theirs = _layer(target)
            if target == "ledger":
                wrong.append(f"{module}:{line} imports the facade `ledger`")
            elif theirs is not None and theirs > mine:
                wrong.append(f"{module}:{line} (layer {mine}) imports {target} (layer {theirs})")
    assert wrong == []


def _cycles() -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_there_is_no_import_cycle() -> None:
    # a package's __init__ importing its own modules is a facade, not a cycle, as long
    # as none of those modules imports the package back
    assert _cycles() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ledger.model.event import Event", "ledger.model.event"),
        ("from ledger.model import Event", "ledger.model"),
        ("from ledger import chain", "ledger.chain"),
        ("import ledger.sinks.url", "ledger.sinks.url"),
    ],
)
def test_the_walk_sees_each_form_of_import(source: str, expected: str, tmp_path: Path) -> None:
    tree = ast.parse(source)
    node = tree.body[0]
    if isinstance(node, ast.Import):
        assert _resolve(node.names[0].name) == expected
    else:
        assert isinstance(node, ast.ImportFrom) and node.module
        full = f"{node.module}.{node.names[0].name}"
        assert (_resolve(full) if full in MODULES else _resolve(node.module)) == expected


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks() -> None:
    typing_only = {t for t, _ in _imports("ledger.sinks")}
    assert "ledger.sinks.postgres" in typing_only  # imported under `if TYPE_CHECKING:`
    lazy = {t for t, _ in _imports("ledger.sinks.opening")}
    assert "ledger.sinks.sqlite" in lazy  # imported inside open_sink()
