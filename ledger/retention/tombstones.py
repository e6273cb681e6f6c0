"""Tombstones for one erasure, built fast from the stored bytes.

>>> from ledger.model.erasure import ALL_FIELDS, erase_stored
>>> maker = TombstoneMaker(fields=ALL_FIELDS, record="01JDX0S1ZQ9T4W8M3V6K2N7B5C",
...                        reason="GDPR Art. 17 request 42")
>>> data = b'{"event_id":"01JDX0S1ZQ9T4W8M3V6K2N7B5D","run_id":"r1","time":"2025-01-01T00:00:00Z",'
>>> data += b'"kind":"action","tool":"send_mail","args":{"to":"alice"},"verdict":"allowed"}'
>>> maker.make(data, "ab" * 32) == erase_stored(data, fields=ALL_FIELDS, leaf_hash="ab" * 32,
...     record="01JDX0S1ZQ9T4W8M3V6K2N7B5C", reason="GDPR Art. 17 request 42")
True

:meth:`TombstoneMaker.make` returns exactly what
:func:`ledger.model.erasure.erase_stored` returns (the tombstone text, its content
hash, ``has_err``; a property test says so), but for the common row of an erasure, an
ordinary event the ledger wrote, erased whole, it builds both the tombstone and its
RFC 8785 form from one format string per shape of row (the tuple of its member names)
instead of serializing dicts: the members a whole erasure keeps are text and a safe
integer, and a stored row without a backslash holds no string that JSON or RFC 8785
would escape, so each value is written as it was read. Anything else (a field-level
erasure, an earlier tombstone, an escape, an unexpected member or type) takes
``erase_stored``.

:meth:`TombstoneMaker.make_page` does the same for a page of rows at once (one
``orjson.loads`` of the page, positional format strings, no call per row): what an
erasure of a run spends in Python is then a few microseconds a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from hashlib import sha256
from operator import itemgetter
from typing import Any

import orjson

from ledger.model.erasure import ALL_FIELDS, KEPT_FIELDS, erase_stored

__all__ = ["TombstoneMaker"]

_SAFE = 2**53 - 1
_ERASABLE = frozenset(ALL_FIELDS)
_KEPT = frozenset(KEPT_FIELDS)
_INT_FIELDS = frozenset(("duration_ms",))
_MARK = b'"erased":{'
_Plan = tuple[Any, tuple[type, ...], int, str, str]  # getter, types, int slot, text, canon
# the page form of a plan: getter, types (the leaf's last), int slot, text, canon, the
# canon's order of the values (text order, the leaf hash last)
_PagePlan = tuple[Any, tuple[type, ...], int, str, str, Any]
Made = tuple[str, str | None, bool]  # tombstone JSON, content hash or None, has_err


class TombstoneMaker:
    """Builds the tombstones of one erasure (``fields`` erased by ``record``, ``reason``)."""

    __slots__ = (
        "_fields",
        "_page_plans",
        "_plans",
        "_reason",
        "_record",
        "_stail",
        "_tail",
        "_whole",
    )

    def __init__(self, *, fields: Iterable[str], record: str, reason: str) -> None:
        wanted = set(fields)
        self._fields = tuple(f for f in ALL_FIELDS if f in wanted)
        self._record, self._reason = record, reason
        self._whole = wanted == _ERASABLE
        records = orjson.dumps([record]).decode()
        why = orjson.dumps(reason).decode()
        # "erased":{"fields":[...],"leaf_hash":"<hex>","records":[...],"reason":"..."};
        # in the RFC 8785 form its members are sorted (reason before records). "fields"
        # names what the row held (each plan's own, by the row's members). The format
        # strings serve rows with no err and no safe marker to keep: a row with an err
        # member takes the general path (its plan is None), and so does a gate_decision
        # (its marked_safe depends on its label and reason)
        self._tail = _literal('","records":' + records + ',"reason":' + why + "}")
        self._stail = _literal('","reason":' + why + ',"records":' + records + "}")
        self._plans: dict[tuple[str, ...], _Plan | None] = {}
        self._page_plans: dict[tuple[str, ...], _PagePlan | None] = {}

    def changes(self, obj: object) -> bool:
        """True when this erasure takes something from the stored event ``obj`` (its
        parsed JSON): always when it erases whole events; a field-level erasure only
        when ``obj`` holds one of its fields (a member; empty values are not stored),
        so a ``run_end`` is left as it is by an erasure of ``args`` and ``result``.

        >>> maker = TombstoneMaker(fields=["args", "result"], record="0" * 26, reason="r")
        >>> maker.changes({"kind": "run_end"}), maker.changes({"kind": "action", "args": {}})
        (False, True)
        """
        return self._whole or (type(obj) is dict and any(f in obj for f in self._fields))

    def make(self, data: bytes, leaf_hex: str) -> tuple[str, str | None, bool]:
        """``(tombstone JSON, content hash or None, has_err)`` for the stored bytes
        ``data`` whose leaf hash is ``leaf_hex``: ``erase_stored``'s result exactly."""
        if self._whole and b"\\" not in data and _MARK not in data:
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                obj = None
            if type(obj) is dict and obj.get("kind") != _DECISION:
                keys = tuple(obj)
                plan = self._plans.get(keys, _UNPLANNED)
                if plan is _UNPLANNED:
                    plan = self._plans[keys] = self._plan(keys)
                if plan is not None:
                    getter, types, slot, text, canon = plan
                    values = getter(obj)
                    if tuple(map(type, values)) == types and (
                        slot < 0 or -_SAFE <= values[slot] <= _SAFE
                    ):
                        obj[_LEAF] = leaf_hex
                        digest = sha256((canon % obj).encode()).hexdigest()
                        return text % obj, "sha256:" + digest, False
        return erase_stored(
            data, fields=self._fields, leaf_hash=leaf_hex, record=self._record, reason=self._reason
        )

    def make_page(
        self, datas: Sequence[bytes], leaves: Sequence[bytes], parsed: Sequence[Any] = ()
    ) -> list[Made]:
        """:meth:`make` of each stored row ``datas[i]`` whose leaf hash is ``leaves[i]``
        (32 bytes), in order: the same results, built for the page at once. ``parsed``,
        when given, is ``orjson.loads`` of each row (read once by the caller); it is
        not changed."""
        if not self._whole:
            return [self.make(d, leaf.hex()) for d, leaf in zip(datas, leaves, strict=True)]
        try:
            objs = list(parsed) if parsed else list(map(orjson.loads, datas))
        except orjson.JSONDecodeError:  # make() says what of it
            return [self.make(d, leaf.hex()) for d, leaf in zip(datas, leaves, strict=True)]
        blob = b"".join(datas)
        clean = b"\\" not in blob and _MARK not in blob  # no row needs a look of its own
        plans, plan_of, make = self._page_plans, self._page_plan, self.make
        get = plans.get
        out: list[Made] = []
        add = out.append
        for obj, data, leaf in zip(objs, datas, leaves, strict=True):
            if (
                type(obj) is dict
                and (clean or (b"\\" not in data and _MARK not in data))
                and obj.get("kind") != _DECISION
            ):
                keys = tuple(obj)
                plan = get(keys, _UNPLANNED)
                if plan is _UNPLANNED:
                    plan = plans[keys] = plan_of(keys)
                if plan is not None:
                    getter, types, slot, text, canon, order = plan
                    values = (*getter(obj), leaf.hex())
                    if tuple(map(type, values)) == types and (
                        slot < 0 or -_SAFE <= values[slot] <= _SAFE
                    ):
                        digest = sha256((canon % order(values)).encode()).hexdigest()
                        add((text % values, "sha256:" + digest, False))
                        continue
            add(make(data, leaf.hex()))
        return out

    def _page_plan(self, keys: tuple[str, ...]) -> _PagePlan | None:
        """:meth:`_plan` with positional format strings (the values in stored order,
        the leaf hash last)."""
        if self._plan(keys) is None:
            return None
        kept = [k for k in keys if k in _KEPT]
        getter = itemgetter(*kept)
        types = (*(int if k in _INT_FIELDS else str for k in kept), str)
        slot = next((i for i, k in enumerate(kept) if k in _INT_FIELDS), -1)
        erased = self._head(keys) + "%s"
        text = "{" + ",".join(map(_slot, kept)) + "," + erased + self._tail + "}"
        members = {k: _slot(k) for k in kept}
        members["erased"] = erased + self._stail
        named = sorted(members)
        canon = "{" + ",".join(members[k] for k in named) + "}"
        position = {k: i for i, k in enumerate(kept)}
        position["erased"] = len(kept)  # the leaf hash, the only slot of "erased"
        order = itemgetter(*(position[k] for k in named))
        return getter, types, slot, text, canon, order

    def _head(self, keys: tuple[str, ...]) -> str:
        """``"erased":{"fields":[...],"leaf_hash":"`` for rows whose members are ``keys``:
        the fields erased that such a row holds."""
        held = orjson.dumps([f for f in self._fields if f in keys]).decode()
        return _literal('"erased":{"fields":' + held + ',"leaf_hash":"')

    def _plan(self, keys: tuple[str, ...]) -> _Plan | None:
        """The format strings for rows whose members are ``keys`` (stored order), or
        None when such a row takes the general path."""
        if not set(keys) <= _ERASABLE | _KEPT or "err" in keys:
            return None
        kept = [k for k in keys if k in _KEPT]
        if len(kept) < 2:  # itemgetter of one key returns the value, not a tuple
            return None
        types = tuple(int if k in _INT_FIELDS else str for k in kept)
        slot = next((i for i, k in enumerate(kept) if k in _INT_FIELDS), -1)
        erased = self._head(keys) + f"%({_LEAF})s"
        text = "{" + ",".join(map(_member, kept)) + "," + erased + self._tail + "}"
        members = {k: _member(k) for k in kept}
        members["erased"] = erased + self._stail
        canon = "{" + ",".join(members[k] for k in sorted(members)) + "}"
        return itemgetter(*kept), types, slot, text, canon


_UNPLANNED: Any = object()  # a shape of row not seen yet
_DECISION = "gate_decision"  # its tombstone keeps marked_safe: the general path
_LEAF = "\x00leaf"  # the leaf hash's slot in a row's mapping (no member has this name)


def _member(key: str) -> str:
    """``"key":"%(key)s"`` (text) or ``"key":%(key)d`` (an integer)."""
    return f'"{key}":%({key})d' if key in _INT_FIELDS else f'"{key}":"%({key})s"'


def _slot(key: str) -> str:
    """``"key":"%s"`` (text) or ``"key":%d`` (an integer)."""
    return f'"{key}":%d' if key in _INT_FIELDS else f'"{key}":"%s"'


def _literal(text: str) -> str:
    """``text`` for a %-format string."""
    return text.replace("%", "%%")
