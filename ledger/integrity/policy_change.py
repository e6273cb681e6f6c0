"""Who may lower the retention floor, and what a floor protects: the rules the erasure
API and ``ledger verify`` both apply to a retention policy.

A change *lowers* when its floor is below the one before it, or when it changes the
policy keys once some are set (changing who may lower the floor is as strong as lowering
it). Such a change stands only when it carries a valid Ed25519 signature, over the RFC
8785 form of the change record without its ``signature`` member, by one of the keys of
the policy before it, and was signed for this log (:func:`signed_here`): its ``after``
names the policy record it replaces, so a change signed for another ledger (one whose
policy the same key governs) does not stand when its record is copied into this one.

>>> from datetime import timedelta
>>> lowers(timedelta(days=180), (), timedelta(days=30), ())
True
>>> lowers(timedelta(days=180), (), timedelta(days=200), ("dpo+1a2b3c4d+AAAA",))
False
>>> signed_by({"floor": "30d", "signature": {"name": "dpo"}}, ())
False

Any other change may carry a signature too (it is then shown as signed by its signer),
but only one that a key of the policy before or after it made (:func:`false_signature`):
a change showing a signature no policy key made claims an approval nobody gave.

>>> false_signature({"after": None, "floor": "200d", "signature": None}, (), ())
False
>>> false_signature({"after": None, "floor": "200d", "signature": {"name": "dpo"}}, (), ())
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ledger.canonical import canonical_bytes
from ledger.integrity._keytext import b64decode
from ledger.integrity.note import Verifier

__all__ = ["false_signature", "floor_cutoff", "lowers", "signed_by", "signed_here"]


def floor_cutoff(at: datetime, floor: timedelta) -> datetime | None:
    """Events dated at or after the time returned are inside a floor of ``floor`` at
    ``at`` (none of them may be erased); None when the floor is zero, which protects
    nothing. An event dated after ``at`` (a writer's clock ahead) is inside any other
    floor: its age is not known.

    >>> floor_cutoff(datetime(2026, 12, 1), timedelta(days=30))
    datetime.datetime(2026, 11, 1, 0, 0)
    >>> floor_cutoff(datetime(2026, 12, 1), timedelta(0)) is None
    True
    """
    return None if floor <= timedelta(0) else at - floor


def lowers(
    old_floor: timedelta,
    old_keys: Sequence[str],
    new_floor: timedelta,
    new_keys: Sequence[str],
) -> bool:
    """True when a policy of ``new_floor`` and ``new_keys`` replacing one of
    ``old_floor`` and ``old_keys`` needs a signature by one of ``old_keys``."""
    if new_floor < old_floor:
        return True
    return bool(old_keys) and set(new_keys) != set(old_keys)


def signed_by(record: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """True when ``record`` (a policy change as the log stores it) carries a valid
    signature, over the RFC 8785 form of the record without it, by one of ``keys``
    (verifier keys as ``ledger key`` prints them; unreadable ones are skipped)."""
    signature = record.get("signature")
    if not isinstance(signature, dict):
        return False
    body = {k: v for k, v in record.items() if k != "signature"}
    try:
        raw = b64decode(str(signature.get("signature")))
        message = canonical_bytes(body, "rfc8785")
    except Exception:  # a malformed signature or body: not signed
        return False
    for text in keys:
        try:
            verifier = Verifier.from_key(text)
        except Exception:  # not a key: it cannot have signed
            continue
        if (
            verifier.name == signature.get("name")
            and f"{verifier.key_id:08x}" == signature.get("key_id")
            and verifier.verify(message, raw)
        ):
            return True
    return False


def false_signature(record: Mapping[str, Any], before: Sequence[str], after: Sequence[str]) -> bool:
    """True when the policy change ``record`` carries a signature (any ``signature``
    member but null, which the ledger writes for an unsigned change) that no key of the
    policy ``before`` it or ``after`` it (its own ``keys``) made: what ``retention show``
    and the report would show as "signed by" would be false. The ledger never writes
    such a change. One written before policy changes named the record they replace
    (``after``) is not held to it: the builds that wrote those did not check who signed
    a change that needed no signature.

    >>> false_signature({"after": None, "signature": {"name": "x"}}, (), ())
    True
    >>> false_signature({"origin": "log-a", "signature": {"name": "x"}}, (), ())
    False
    """
    if record.get("signature") is None or "after" not in record:
        return False
    return not signed_by(record, (*before, *after))


def signed_here(record: Mapping[str, Any], before: str | None) -> bool:
    """True when the policy change ``record`` was made for the log it stands in, whose
    policy record before it has the event id ``before``: the change names that record
    in ``after`` (event ids are unique to a ledger, and ``ledger db copy`` keeps them,
    so a copy's history, and a copy's copy's, still holds). A change written before
    ``after`` existed is not bound to a ledger, and stands as it always did.

    >>> signed_here({"after": "01A"}, "01A"), signed_here({"after": "01A"}, "01B")
    (True, False)
    >>> signed_here({"origin": "log-a"}, "01B")  # written before after existed
    True
    """
    if "after" not in record:
        return True
    return before is not None and record["after"] == before
