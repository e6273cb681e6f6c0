"""Tool definitions as evidence: their content hashes, the record of them, and pins.

>>> d = definition_of({"name": "git_status", "description": "Shows the working tree status",
...                    "inputSchema": {"type": "object"}})
>>> definition_hash(d)[:7]
'sha256:'

A definition is what the model is shown about a tool: ``name``, ``title``,
``description``, ``inputSchema``, ``outputSchema`` and ``annotations`` (fields the server
left out are left out). Its hash is ``sha256:`` over its RFC 8785 canonical JSON, so the
same definition hashes the same whatever the key order or number spelling on the wire.

The gateway records a definition as a ``retrieved`` event of the run (``tool`` = the tool
name, ``label`` :data:`DEFINITION_LABEL`, ``args`` = the definition, one ref
``Ref("tool", "mcp-tool:<server>/<tool>", hash)``), and every call cites that ref as its
evidence. :class:`DefinitionResolver` lets ``ledger drift`` check such refs: the current
hash of ``mcp-tool:<server>/<tool>`` is that of the newest definition of the tool the
ledger holds, so a call allowed under a definition the server later changed shows as
``drifted``.

:class:`Pins` keeps the accepted hash per tool in a JSON file (``--pins FILE``), so an
accepted definition survives restarts and ``ledger mcp accept`` can accept a changed one
while the proxy runs. This module does not import the MCP SDK.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.canonical import sha256_of
from ledger.drift import EventResolver
from ledger.errors import LedgerError, ValidationError
from ledger.model import Event
from ledger.model.values import Kind, Ref, RefSource
from ledger.sinks import Reader

__all__ = [
    "DEFINITION_FIELDS",
    "DEFINITION_LABEL",
    "DefinitionResolver",
    "Pins",
    "PinsError",
    "definition_event",
    "definition_hash",
    "definition_of",
    "definition_ref",
    "definition_ref_id",
    "tool_resolver",
]

log = logging.getLogger(__name__)

DEFINITION_LABEL = "mcp tool definition"
DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
REF_PREFIX = "mcp-tool:"


class PinsError(LedgerError):
    """A pins file that cannot be read or written."""


def definition_of(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence fields of a tool as listed on the wire (camelCase keys)."""
    return {k: tool[k] for k in DEFINITION_FIELDS if tool.get(k) is not None}


def definition_hash(definition: Mapping[str, Any]) -> str:
    """``sha256:`` + hex over the RFC 8785 form of ``definition``."""
    return sha256_of(dict(definition), profile="rfc8785")


def definition_ref_id(server: str, tool: str) -> str:
    """The ref id naming a tool of a server: ``mcp-tool:<server>/<tool>``."""
    return f"{REF_PREFIX}{server}/{tool}"


def definition_ref(server: str, tool: str, digest: str) -> Ref:
    """The ref a call cites: the tool's definition, by name and hash."""
    return Ref(source=RefSource.TOOL, id=definition_ref_id(server, tool), hash=digest)


def definition_event(
    *,
    run_id: str,
    agent_path: str,
    server: str,
    definition: Mapping[str, Any],
    digest: str,
    note: str = "",
) -> Event:
    """The ``retrieved`` event recording one definition in a run."""
    name = str(definition.get("name", ""))
    preview = f"{name} {digest[:19]}" + (f" ({note})" if note else "")
    return Event(
        kind=Kind.RETRIEVED,
        run_id=run_id,
        agent_path=agent_path,
        tool=name,
        label=DEFINITION_LABEL,
        preview=preview[:200],
        reason=note,
        args=json.dumps(dict(definition), ensure_ascii=False, separators=(",", ":")),
        refs=(definition_ref(server, name, digest),),
    )


class DefinitionResolver:
    """Resolves ``tool`` refs: ``mcp-tool:`` ids to the newest recorded definition's hash,
    any other id as :class:`~ledger.drift.EventResolver` does (a recorded tool result)."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._events = EventResolver(reader)

    @property
    def sources(self) -> frozenset[RefSource]:
        return frozenset({RefSource.TOOL})

    def current_hash(self, source: RefSource, id: str) -> str | None:
        if not id.startswith(REF_PREFIX):
            return self._events.current_hash(source, id)
        tool = id.rsplit("/", 1)[-1]
        newest: str | None = None
        for event in self._reader.events(kind=Kind.RETRIEVED, tool=tool):
            if event.label != DEFINITION_LABEL:
                continue
            for ref in event.refs:
                if ref.id == id and ref.hash:
                    newest = ref.hash
        return newest


def tool_resolver(reader: Reader) -> DefinitionResolver:
    """The resolver ``ledger drift`` uses for ``tool`` refs."""
    return DefinitionResolver(reader)


@dataclass(slots=True)
class Pins:
    """Accepted definition hashes per tool, optionally kept in a JSON file.

    ``Pins.load(path)`` (a missing file is an empty set of pins); ``accepted`` and
    ``pending`` map tool names to hashes. The file::

        {"version": 1, "accepted": {"git_status": "sha256:..."},
         "pending": {"git_commit": "sha256:..."}}

    Writes replace the file atomically (a temporary file renamed over it).
    """

    path: Path | None = None
    accepted: dict[str, str] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None) -> Pins:
        if path is None:
            return cls()
        p = Path(path)
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path=p)
        except (OSError, ValueError) as exc:
            raise PinsError(f"pins file {p}: cannot be read as JSON ({exc})") from None
        if not isinstance(raw, dict) or raw.get("version") != 1:
            raise PinsError(f"pins file {p}: not a pins file (expected a version 1 object)")
        pins = cls(path=p)
        for key in ("accepted", "pending"):
            part = raw.get(key, {})
            if not isinstance(part, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in part.items()
            ):
                raise PinsError(f"pins file {p}: {key!r} must map tool names to hashes")
            getattr(pins, key).update(part)
        return pins

    def reload(self) -> None:
        """Re-read the file (an operator may have accepted a definition meanwhile)."""
        if self.path is None:
            return
        fresh = Pins.load(self.path)
        self.accepted, self.pending = fresh.accepted, fresh.pending

    def save(self) -> None:
        if self.path is None:
            return
        data = {"version": 1, "accepted": self.accepted, "pending": self.pending}
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        directory = self.path.parent
        try:
            fd, tmp = tempfile.mkstemp(prefix=".pins-", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise PinsError(f"pins file {self.path}: cannot be written ({exc})") from None

    def accept(self, tools: Collection[str] = ()) -> list[tuple[str, str]]:
        """Accept the pending definitions of ``tools`` (all pending ones when empty);
        returns the ``(tool, hash)`` pairs accepted. Unknown names raise ``ValidationError``."""
        names = list(tools) or sorted(self.pending)
        missing = [t for t in names if t not in self.pending]
        if missing:
            have = ", ".join(sorted(self.pending)) or "none"
            raise ValidationError(
                f"no pending definition for {', '.join(missing)} (pending: {have})"
            )
        done = [(t, self.pending.pop(t)) for t in names]
        self.accepted.update(done)
        return done

    def items(self) -> Iterator[tuple[str, str, str]]:
        """``(tool, state, hash)`` for every pin, state ``accepted`` or ``pending``."""
        for tool, digest in sorted(self.accepted.items()):
            yield tool, "accepted", digest
        for tool, digest in sorted(self.pending.items()):
            yield tool, "pending", digest
