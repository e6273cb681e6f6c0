"""Drift: does the evidence an action rested on still say what it said then?

>>> from ledger.model import Ref
>>> seen = Ref(source="memory", id="m1", hash=content_hash("the text then"))
>>> resolver = StaticResolver({("memory", "m1"): "the text now"})
>>> [c.state for c in verify_refs([seen], resolver)]
[<RefState.DRIFTED: 'drifted'>]

Each ref is **intact** (its current hash equals the one captured), **drifted** (they
differ), **missing** (the resolver knows the source but not the item: deleted),
**erased** (the item is still there but retention erased the content the hash covers:
``ledger erase``, a recorded and allowed removal, so neither drift nor a failure; the
detail names the reason) or **unverifiable** (no hash was captured, the source is
unknown, the resolver does not handle that source, or the resolver failed).
Unverifiable is never reported as intact. A resolver says "erased" by raising
:class:`ErasedContent` from ``current_hash``.

Hashes compare without their ``sha256:`` prefix and case, so a bare hex hash captured by
the reference and a prefixed one name the same content.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ledger.canonical import sha256_hex
from ledger.errors import EventNotFound, ValidationError
from ledger.model.erasure import erased_reason
from ledger.model.sealed import is_envelope
from ledger.model.values import Ref, RefSource

if TYPE_CHECKING:
    from ledger.chain.assemble import Chain
    from ledger.model.event import Event

__all__ = [
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
]

log = logging.getLogger(__name__)


def content_hash(content: str | bytes) -> str:
    """``"sha256:"`` + hex SHA-256 of ``content`` (text is taken as UTF-8): the hash a
    :class:`~ledger.model.Ref` captures (:func:`ledger.canonical.sha256_hex`)."""
    return sha256_hex(content)


def _norm(digest: str) -> str:
    digest = digest.strip().lower()
    return digest[7:] if digest.startswith("sha256:") else digest


class RefState(StrEnum):
    INTACT = "intact"
    DRIFTED = "drifted"
    MISSING = "missing"
    UNVERIFIABLE = "unverifiable"
    ERASED = "erased"  # added last: the earlier values keep their order


class ErasedContent(Exception):
    """Raised by a resolver's ``current_hash`` when the item is known but the content
    its hash covers was erased by retention; ``reason`` is the erasure's reason (the
    ref is then :attr:`RefState.ERASED`, not drifted)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"[erased: {reason}]")
        self.reason = reason


class SealedContent(Exception):
    """Raised by a resolver's ``current_hash`` when the item's content is stored
    encrypted (a crypto-shredding ledger read without the payload key): its hash cannot
    be compared with the captured one, so the ref is :attr:`RefState.UNVERIFIABLE`,
    never drifted."""


@runtime_checkable
class Resolver(Protocol):
    """Looks up the current content hash of referenced items."""

    @property
    def sources(self) -> Collection[RefSource]:
        """The sources it can look up."""
        ...

    def current_hash(self, source: RefSource, id: str) -> str | None:
        """The item's hash now, or ``None`` when it is unknown or deleted."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RefCheck:
    """The verdict on one ref."""

    ref: Ref
    state: RefState
    current_hash: str | None = None
    detail: str = ""


def _check(ref: Ref, resolver: Resolver) -> RefCheck:
    if not ref.known_source or ref.source not in resolver.sources:
        why = f"no resolver for source {str(ref.source)!r}"
        return RefCheck(ref=ref, state=RefState.UNVERIFIABLE, detail=why)
    assert isinstance(ref.source, RefSource)
    try:
        current = resolver.current_hash(ref.source, ref.id)
    except ErasedContent as gone:  # a recorded, allowed erasure: not drift, not a failure
        return RefCheck(ref=ref, state=RefState.ERASED, detail=str(gone))
    except SealedContent as sealed:  # encrypted, and no key to open it: not drift either
        return RefCheck(ref=ref, state=RefState.UNVERIFIABLE, detail=str(sealed))
    except Exception as exc:  # a resolver's failure must not pass for a verdict
        log.warning("resolver failed for %s %s: %s", ref.source, ref.id, exc)
        return RefCheck(ref=ref, state=RefState.UNVERIFIABLE, detail=f"resolver failed: {exc}")
    if not ref.hash:
        return RefCheck(
            ref=ref, state=RefState.UNVERIFIABLE, current_hash=current, detail="no hash captured"
        )
    if current is None:
        return RefCheck(ref=ref, state=RefState.MISSING, detail="unknown or deleted")
    state = RefState.INTACT if _norm(current) == _norm(ref.hash) else RefState.DRIFTED
    return RefCheck(ref=ref, state=state, current_hash=current)


def verify_refs(refs: Iterable[Ref], resolver: Resolver) -> list[RefCheck]:
    """Check each ref against ``resolver``; one :class:`RefCheck` per ref, in order."""
    if not isinstance(resolver, Resolver):
        raise ValidationError(
            f"resolver: {type(resolver).__name__} is not a Resolver (it needs a `sources` "
            "collection and a current_hash(source, id) method)"
        )
    return [_check(ref, resolver) for ref in refs]


def chain_refs(chain: Chain) -> list[Ref]:
    """Every distinct ref of a chain: what was available, then each action's evidence."""
    refs = list(chain.available) + [r for a in chain.actions for r in a.evidence]
    return list(dict.fromkeys(refs))


def _source(value: RefSource | str) -> RefSource:
    try:
        return RefSource(value)
    except ValueError:
        known = ", ".join(repr(s.value) for s in RefSource)
        raise ValidationError(f"source: {value!r} is not one of {known}") from None


class StaticResolver:
    """A resolver over known contents: ``{(source, id): content}``.

    >>> StaticResolver({("memory", "m1"): "text"}).current_hash(RefSource.MEMORY, "m1")
    'sha256:982d9e3eb996f559e633f4d194def3761d909f5a3b647d1a851fead67c32c9d1'
    """

    def __init__(
        self,
        contents: Mapping[tuple[RefSource | str, str], str | bytes],
        *,
        sources: Collection[RefSource | str] | None = None,
    ) -> None:
        self._hashes = {(_source(s), i): content_hash(c) for (s, i), c in contents.items()}
        chosen = sources if sources is not None else {s for s, _ in self._hashes}
        self._sources = frozenset(_source(s) for s in chosen)

    @property
    def sources(self) -> frozenset[RefSource]:
        return self._sources

    def current_hash(self, source: RefSource, id: str) -> str | None:
        return self._hashes.get((RefSource(source), id))


class _EventGetter(Protocol):
    def get(self, event_id: str) -> Event: ...


class EventResolver:
    """Resolves ``tool`` refs (ids of recorded tool results) through a ledger reader:
    the current hash is that of the stored result text, as ``assemble_chain`` captures.
    A result erased by retention raises :class:`ErasedContent` (the ref reads as
    erased, not drifted); one stored encrypted and read without the payload key,
    :class:`SealedContent` (unverifiable)."""

    def __init__(self, reader: _EventGetter) -> None:
        self._reader = reader
        self._sealed: bool | None = None  # does the reader leave payloads encrypted?

    @property
    def sources(self) -> frozenset[RefSource]:
        return frozenset({RefSource.TOOL})

    def current_hash(self, source: RefSource, id: str) -> str | None:
        try:
            event = self._reader.get(id)
        except EventNotFound:
            return None
        said = erased_reason(event, "result")
        if said is not None:
            raise ErasedContent(said)
        if is_envelope(event.result) and self._shows_sealed():
            # the ciphertext's hash would match nothing (a result recorded in clear that
            # only looks like an envelope is hashed as any other)
            raise SealedContent(
                "the result is stored encrypted (a crypto-shredding ledger) and was read "
                "without the payload key: set LEDGER_PAYLOAD_KEY to check it"
            )
        return content_hash(event.result) if event.result is not None else ""

    def _shows_sealed(self) -> bool:
        """Whether the reader leaves encrypted payloads as stored (its
        ``shows_sealed_payloads()``, asked once; a reader without it never does)."""
        if self._sealed is None:
            probe = getattr(self._reader, "shows_sealed_payloads", None)
            self._sealed = bool(probe()) if callable(probe) else False
        return self._sealed
