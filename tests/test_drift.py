"""Drift: is the evidence still what it was? (conformance item 33; defect 11 fixed)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger import (
    Event,
    EventNotFound,
    EventResolver,
    Kind,
    Ref,
    RefCheck,
    RefSource,
    RefState,
    Resolver,
    StaticResolver,
    StorageError,
    Verdict,
    assemble_chain,
    content_hash,
    verify_refs,
)
from ledger.drift import chain_refs


def verify(refs: Iterable[Ref], resolver: object) -> list[RefCheck]:
    """``verify_refs`` with the resolver passed untyped: mypy does not accept the shipped
    resolvers as ``Resolver`` (see ``test_shipped_resolvers_type_check_as_resolver``)."""
    return verify_refs(refs, cast(Resolver, resolver))


def sha_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- content_hash ----------------------------------------------------------------------


def test_content_hash_is_prefixed_sha256_of_utf8() -> None:
    assert content_hash("text") == (
        "sha256:982d9e3eb996f559e633f4d194def3761d909f5a3b647d1a851fead67c32c9d1"
    )
    assert content_hash("") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert content_hash("café") == content_hash("café".encode()) == "sha256:" + sha_hex("café")


def test_content_hash_shape() -> None:
    digest = content_hash(b"\x00\xff")
    assert digest.startswith("sha256:")
    assert len(digest) == 7 + 64
    assert digest[7:] == digest[7:].lower()
    assert content_hash("a") != content_hash("b")


# --- the four states -------------------------------------------------------------------


def memory_resolver(**entries: str) -> StaticResolver:
    return StaticResolver(
        {(RefSource.MEMORY, k): v for k, v in entries.items()}, sources={RefSource.MEMORY}
    )


def test_intact_when_the_content_is_unchanged() -> None:
    ref = Ref(source="memory", id="m1", hash=content_hash("the notes"))
    (check,) = verify([ref], memory_resolver(m1="the notes"))
    assert isinstance(check, RefCheck)
    assert check.ref is ref
    assert check.state is RefState.INTACT
    assert check.current_hash == content_hash("the notes")


def test_drifted_when_the_content_changed() -> None:
    ref = Ref(source="memory", id="m1", hash=content_hash("the notes"))
    (check,) = verify([ref], memory_resolver(m1="edited notes"))
    assert check.state is RefState.DRIFTED
    assert check.current_hash == content_hash("edited notes")


def test_missing_when_the_item_is_gone() -> None:
    ref = Ref(source="memory", id="m1", hash=content_hash("the notes"))
    (check,) = verify([ref], memory_resolver(m2="other"))
    assert check.state is RefState.MISSING
    assert check.current_hash is None


def test_unverifiable_when_no_hash_was_captured() -> None:
    ref = Ref(source="memory", id="m1", hash="")
    (check,) = verify([ref], memory_resolver(m1="the notes"))
    assert check.state is RefState.UNVERIFIABLE
    assert "hash" in check.detail


@pytest.mark.parametrize("source", ["", "web", "MEMORY"])
def test_unverifiable_for_an_unknown_source_string(source: str) -> None:
    ref = Ref(source=source, id="m1", hash=content_hash("the notes"))
    (check,) = verify([ref], memory_resolver(m1="the notes"))
    assert check.state is RefState.UNVERIFIABLE
    assert check.current_hash is None


def test_unverifiable_for_a_source_the_resolver_does_not_handle() -> None:
    calls: list[tuple[RefSource, str]] = []

    class MemoryOnly:
        sources: Collection[RefSource] = frozenset({RefSource.MEMORY})

        def current_hash(self, source: RefSource, id: str) -> str | None:
            calls.append((source, id))
            return content_hash("anything")

    ref = Ref(source="tool", id="01ARZ3NDEKTSV4RRFFQ69G5FAV", hash=content_hash("anything"))
    (check,) = verify([ref], MemoryOnly())
    assert check.state is RefState.UNVERIFIABLE
    assert calls == []  # it was not even asked


def test_unverifiable_when_the_resolver_raises() -> None:
    class Broken:
        sources: Collection[RefSource] = frozenset(RefSource)

        def current_hash(self, source: RefSource, id: str) -> str | None:
            raise ConnectionError("memory store is down")

    refs = [Ref(source="memory", id="m1", hash=content_hash("x")), Ref(source="ledger", id="l1")]
    checks = verify(refs, Broken())
    assert [c.state for c in checks] == [RefState.UNVERIFIABLE, RefState.UNVERIFIABLE]
    assert "memory store is down" in checks[0].detail


@pytest.mark.parametrize(
    "captured",
    [
        content_hash("the notes"),
        sha_hex("the notes"),  # the reference captures bare lowercase hex
        sha_hex("the notes").upper(),
        "SHA256:" + sha_hex("the notes"),
    ],
    ids=["prefixed", "bare", "upper", "upper-prefix"],
)
def test_prefixed_and_bare_hex_name_the_same_content(captured: str) -> None:
    ref = Ref(source="memory", id="m1", hash=captured)
    (check,) = verify([ref], memory_resolver(m1="the notes"))
    assert check.state is RefState.INTACT


def test_bare_hex_from_the_resolver_compares_with_a_prefixed_capture() -> None:
    class BareHex:
        sources: Collection[RefSource] = frozenset({RefSource.MEMORY})

        def current_hash(self, source: RefSource, id: str) -> str | None:
            return sha_hex("the notes")

    ref = Ref(source="memory", id="m1", hash=content_hash("the notes"))
    assert verify([ref], BareHex())[0].state is RefState.INTACT


def test_one_check_per_ref_in_order() -> None:
    refs = [
        Ref(source="memory", id="gone", hash=content_hash("a")),
        Ref(source="memory", id="m1", hash=content_hash("same")),
        Ref(source="memory", id="m2", hash=content_hash("before")),
        Ref(source="tool", id="e1", hash=content_hash("x")),
        Ref(source="memory", id="m1", hash=content_hash("same")),
    ]
    checks = verify(iter(refs), memory_resolver(m1="same", m2="after"))
    assert [c.ref for c in checks] == refs
    assert [c.state for c in checks] == [
        RefState.MISSING,
        RefState.INTACT,
        RefState.DRIFTED,
        RefState.UNVERIFIABLE,
        RefState.INTACT,
    ]
    assert verify([], memory_resolver()) == []


def test_ref_state_values() -> None:
    assert [s.value for s in RefState] == ["intact", "drifted", "missing", "unverifiable", "erased"]


# --- StaticResolver --------------------------------------------------------------------


def test_static_resolver_hashes_its_contents() -> None:
    resolver = StaticResolver({("memory", "m1"): "text", (RefSource.TOOL, "e1"): b"\x00"})
    assert resolver.current_hash(RefSource.MEMORY, "m1") == content_hash("text")
    assert resolver.current_hash(RefSource.TOOL, "e1") == content_hash(b"\x00")
    assert resolver.current_hash(RefSource.MEMORY, "nope") is None
    assert resolver.sources == frozenset({RefSource.MEMORY, RefSource.TOOL})


def test_static_resolver_sources_can_be_named() -> None:
    resolver = StaticResolver({}, sources=["memory"])
    assert resolver.sources == frozenset({RefSource.MEMORY})
    ref = Ref(source="memory", id="m1", hash=content_hash("x"))
    assert verify([ref], resolver)[0].state is RefState.MISSING
    # with no contents and no sources named, nothing can be verified
    assert verify([ref], StaticResolver({}))[0].state is RefState.UNVERIFIABLE


def test_resolvers_satisfy_the_protocol() -> None:
    assert isinstance(StaticResolver({}), Resolver)
    assert isinstance(EventResolver(DictReader()), Resolver)
    assert isinstance(MemoryStore().resolver(), Resolver)


# --- conformance item 33: drift after a memory entry is superseded ---------------------


@dataclass
class Entry:
    id: str
    key: str
    text: str


@dataclass
class MemoryStore:
    """A tiny memory: entries by id; superseding appends a new entry for the same key.

    ``keep_old`` decides what happens to the old id: kept but resolved to the key's
    latest text (its content changed), or removed (it is gone)."""

    keep_old: bool = False
    entries: dict[str, Entry] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    counter: int = 0

    def add(self, key: str, text: str) -> Entry:
        self.counter += 1
        entry = Entry(id=f"mem-{self.counter}", key=key, text=text)
        old = self.latest.get(key)
        if old is not None and not self.keep_old:
            del self.entries[old]
        self.entries[entry.id] = entry
        self.latest[key] = entry.id
        return entry

    def get(self, entry_id: str) -> Entry | None:
        entry = self.entries.get(entry_id)
        if entry is None:
            return None
        return self.entries[self.latest[entry.key]]

    def resolver(self) -> MemoryResolver:
        return MemoryResolver(self)


class MemoryResolver:
    """The reference's memResolver: memory refs only, hash of the entry text."""

    sources: Collection[RefSource] = frozenset({RefSource.MEMORY})

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def current_hash(self, source: RefSource, id: str) -> str | None:
        if source is not RefSource.MEMORY:
            return None
        entry = self._store.get(id)
        return None if entry is None else sha_hex(entry.text)  # bare hex, like the reference


@pytest.mark.parametrize(
    ("keep_old", "expected"), [(False, RefState.MISSING), (True, RefState.DRIFTED)]
)
def test_item33_superseded_memory_entry_is_detected(keep_old: bool, expected: RefState) -> None:
    store = MemoryStore(keep_old=keep_old)
    entry = store.add("deploy-target", "staging")
    other = store.add("owner", "ops team")
    captured = (
        Ref(source="memory", id=entry.id, hash=sha_hex(entry.text)),
        Ref(source="memory", id=other.id, hash=sha_hex(other.text)),
    )
    request = Event(kind=Kind.REQUEST, run_id="r1", args='"deploy"')
    act = Event(
        kind=Kind.ACTION,
        run_id="r1",
        call_id="c1",
        tool="deploy",
        args='{"target":"staging"}',
        verdict=Verdict.ALLOWED,
        refs=(Ref(source="tool", id=str(request.event_id)), captured[0]),
    )
    chain = assemble_chain([request, Event(kind=Kind.RETRIEVED, run_id="r1", refs=captured), act])
    resolver = store.resolver()
    refs = chain_refs(chain)

    before = {c.ref.id: c.state for c in verify(refs, resolver)}
    assert before == {
        entry.id: RefState.INTACT,
        other.id: RefState.INTACT,
        str(request.event_id): RefState.UNVERIFIABLE,  # tool ref, memory resolver
    }

    store.add("deploy-target", "production")  # same key, new text

    after = {c.ref.id: c.state for c in verify(refs, resolver)}
    assert after[entry.id] is expected
    assert after[entry.id] is not RefState.INTACT
    assert after[other.id] is RefState.INTACT
    evidence = verify(chain.action("c1").evidence, resolver)
    assert [c.state for c in evidence] == [RefState.UNVERIFIABLE, expected]


def test_item33_with_a_static_resolver_snapshot() -> None:
    ref = Ref(source="memory", id="m1", hash=content_hash("staging"))
    then = StaticResolver({("memory", "m1"): "staging"})
    now_changed = StaticResolver({("memory", "m1"): "production"})
    now_deleted = StaticResolver({}, sources={RefSource.MEMORY})
    assert verify([ref], then)[0].state is RefState.INTACT
    assert verify([ref], now_changed)[0].state is RefState.DRIFTED
    assert verify([ref], now_deleted)[0].state is RefState.MISSING


# --- EventResolver ---------------------------------------------------------------------


class DictReader:
    """The smallest reader: ``get`` by event id, ``EventNotFound`` when absent."""

    def __init__(self, *events: Event) -> None:
        self.events = {str(e.event_id): e for e in events}
        self.asked: list[str] = []

    def get(self, event_id: str) -> Event:
        self.asked.append(event_id)
        try:
            return self.events[str(event_id)]
        except KeyError:
            raise EventNotFound(f"no event {event_id}") from None


def test_event_resolver_verifies_safe_reads_captured_by_the_chain() -> None:
    read = Event(kind=Kind.TOOL_RESULT, run_id="r1", call_id="s1", tool="read", result='{"v": 1}')
    chain = assemble_chain([Event(kind=Kind.REQUEST, run_id="r1"), read])
    (ref,) = chain.available
    reader = DictReader(read)
    resolver = EventResolver(reader)

    assert verify([ref], resolver)[0].state is RefState.INTACT
    assert reader.asked == [str(read.event_id)]

    reader.events[str(read.event_id)] = read.replace(result='{"v": 2}')
    assert verify([ref], resolver)[0].state is RefState.DRIFTED

    del reader.events[str(read.event_id)]
    assert verify([ref], resolver)[0].state is RefState.MISSING


def test_event_resolver_hash_is_the_stored_result_text() -> None:
    stored = Event(kind=Kind.TOOL_RESULT, result="[1,  2]")
    resolver = EventResolver(DictReader(stored))
    assert resolver.current_hash(RefSource.TOOL, str(stored.event_id)) == content_hash("[1,  2]")
    assert resolver.current_hash(RefSource.TOOL, "01ARZ3NDEKTSV4RRFFQ69G5FAV") is None
    assert resolver.sources == frozenset({RefSource.TOOL})


def test_event_resolver_only_handles_tool_refs() -> None:
    reader = DictReader()
    ref = Ref(source="memory", id="m1", hash=content_hash("x"))
    assert verify([ref], EventResolver(reader))[0].state is RefState.UNVERIFIABLE
    assert reader.asked == []


def test_event_resolver_reader_failure_is_unverifiable() -> None:
    class FailingReader:
        def get(self, event_id: str) -> Event:
            raise StorageError("database is locked")

    ref = Ref(source="tool", id="01ARZ3NDEKTSV4RRFFQ69G5FAV", hash=content_hash("x"))
    (check,) = verify([ref], EventResolver(FailingReader()))
    assert check.state is RefState.UNVERIFIABLE
    assert "database is locked" in check.detail


def test_event_resolver_result_without_text_cannot_be_intact() -> None:
    stored = Event(kind=Kind.TOOL_RESULT, result=None)
    ref = Ref(source="tool", id=str(stored.event_id), hash=content_hash("something"))
    assert verify([ref], EventResolver(DictReader(stored)))[0].state is RefState.DRIFTED


# --- chain_refs ------------------------------------------------------------------------


def test_chain_refs_lists_available_then_evidence_without_duplicates() -> None:
    m1 = Ref(source="memory", id="m1", hash="h1")
    m2 = Ref(source="memory", id="m2", hash="h2")
    req = Event(kind=Kind.REQUEST, run_id="r1")
    head = Ref(source="tool", id=str(req.event_id))
    read = Event(kind=Kind.TOOL_RESULT, run_id="r1", call_id="s1", result='"r"')
    events = [
        req,
        Event(kind=Kind.RETRIEVED, run_id="r1", refs=(m1,)),
        read,
        Event(kind=Kind.ACTION, run_id="r1", call_id="c1", tool="t", refs=(head, m1)),
        Event(kind=Kind.ACTION, run_id="r1", call_id="c2", tool="t", refs=(m2, head)),
    ]
    chain = assemble_chain(events)
    read_ref = Ref(source="tool", id=str(read.event_id), hash=content_hash('"r"'))
    assert chain_refs(chain) == [m1, read_ref, head, m2]
    assert chain_refs(assemble_chain([])) == []


# --- property: a verdict of intact is never given without evidence --------------------

sources = st.sampled_from(["memory", "tool", "ledger", "", "web"])
contents = st.sampled_from(["a", "b", "c"])


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(list(RefSource)), st.sampled_from(["x", "y"])), contents
    ),
    st.lists(
        st.builds(
            Ref,
            source=sources,
            id=st.sampled_from(["x", "y", "z"]),
            hash=st.one_of(st.just(""), contents.map(content_hash), contents.map(sha_hex)),
        ),
        max_size=6,
    ),
)
def test_states_follow_the_definitions(
    known: dict[tuple[RefSource, str], str], refs: list[Ref]
) -> None:
    resolver = StaticResolver(known, sources=set(RefSource))  # type: ignore[arg-type]
    checks = verify(refs, resolver)
    assert len(checks) == len(refs)
    for ref, check in zip(refs, checks, strict=True):
        assert check.ref is ref
        if not ref.known_source or not ref.hash:
            assert check.state is RefState.UNVERIFIABLE
            continue
        assert isinstance(ref.source, RefSource)
        content = known.get((ref.source, ref.id))
        if content is None:
            assert check.state is RefState.MISSING
        elif ref.hash.removeprefix("sha256:") == sha_hex(content):
            assert check.state is RefState.INTACT
        else:
            assert check.state is RefState.DRIFTED


# --- the typed API: the shipped resolvers are Resolvers for mypy --strict ----------------


def test_a_user_resolver_type_checks(mypy_snippet: Callable[[str], tuple[int, str]]) -> None:
    # the control for the test below: the harness finds ledger and accepts a good resolver
    status, report = mypy_snippet(
        """
        from collections.abc import Collection
        from ledger import RefCheck, RefSource, verify_refs

        class Mine:
            sources: Collection[RefSource] = frozenset({RefSource.MEMORY})

            def current_hash(self, source: RefSource, id: str) -> str | None:
                return None

        def check() -> list[RefCheck]:
            return verify_refs([], Mine())
        """,
    )
    assert status == 0, report


def test_shipped_resolvers_type_check_as_resolver(
    mypy_snippet: Callable[[str], tuple[int, str]],
) -> None:
    status, report = mypy_snippet(
        """
        from ledger import Event, EventResolver, RefCheck, Resolver, StaticResolver, verify_refs

        class Reader:
            def get(self, event_id: str) -> Event:
                raise NotImplementedError

        def check() -> list[RefCheck]:
            resolver: Resolver = StaticResolver({("memory", "m1"): "text"})
            return verify_refs([], resolver) + verify_refs([], EventResolver(Reader()))
        """,
    )
    assert status == 0, report


def test_verify_refs_refuses_something_that_is_not_a_resolver() -> None:
    with pytest.raises(ledger.ValidationError, match="not a Resolver"):
        verify_refs([Ref(source="memory", id="m1", hash="sha256:00")], object())  # type: ignore[arg-type]
