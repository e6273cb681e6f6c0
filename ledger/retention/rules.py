"""The retention rules, pure: the policy (keep, floor), legal holds, and what an erasure
may touch (durations are read by :func:`ledger.timefmt.parse_duration`).

>>> from ledger.timefmt import parse_duration
>>> parse_duration("400d")
datetime.timedelta(days=400)
>>> p = Policy(keep=parse_duration("400d"), floor=parse_duration("180d"))
>>> p.cutoff(datetime(2026, 12, 1, tzinfo=UTC))
datetime.datetime(2026, 6, 4, 0, 0, tzinfo=datetime.timezone.utc)
>>> change_kind(p, Policy(keep=p.keep, floor=parse_duration("200d")))
'raise'

* ``keep``: events older than this may be erased as *expired* (``ledger erase
  --expired``); younger ones may still be erased on request (GDPR Art. 17) as long as
  they are older than the floor.
* ``floor``: nothing younger than it can be erased or pruned, whatever the caller asks.
  It can be raised freely; lowering it needs a policy change signed by one of the
  policy's keys (:func:`change_kind` says which change is which).
* A legal hold (:class:`Hold`) covers a run, or a time range (either end open); while it
  stands, no event it covers can be erased.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ledger.errors import RetentionError, ValidationError
from ledger.integrity.policy_change import floor_cutoff, lowers
from ledger.timefmt import check_duration, format_duration, format_time, round_up_finer

__all__ = [
    "MAX_REASON",
    "Hold",
    "Policy",
    "change_kind",
    "parse_date",
    "require_reason",
    "visible_text",
]


def parse_date(text: str, *, what: str = "date") -> datetime:
    """``2026-01-31`` (midnight UTC) or an RFC 3339 time with a zone; ``ValidationError``
    otherwise (a malformed date is never guessed at).

    A time finer than a microsecond is a bound between two stored times (events are
    stored to the microsecond): it is rounded up to the next microsecond, where an
    event is at or after it (``--since``) or before it (``--until``, ``--before``)
    exactly when it is so of the time given.

    >>> parse_date("2026-01-31")
    datetime.datetime(2026, 1, 31, 0, 0, tzinfo=datetime.timezone.utc)
    >>> parse_date("2026-01-31T00:00:00.0000001Z").microsecond
    1
    """
    from ledger.timefmt import parse_time

    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"{what}: give a date (2026-01-31) or an RFC 3339 time")
    value = text.strip()
    if re.fullmatch(r"\d{4}-\d\d-\d\d", value, re.ASCII):
        try:
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            raise ValidationError(f"{what}: {text!r} is not a calendar date") from None
    try:
        moment = parse_time(value, field=what)
    except ValidationError:
        raise ValidationError(
            f"{what}: {text!r} is not a date (2026-01-31) or an RFC 3339 time with a zone "
            "(2026-01-31T12:00:00Z)"
        ) from None
    return round_up_finer(moment, value, field=what)


MAX_REASON = 1000
"""The longest reason, in characters: an erasure's reason is kept in every tombstone
it writes, and erased rows keep a small size."""


def require_reason(reason: object, what: str = "reason") -> str:
    """The reason stripped; ``ValidationError`` when it is missing or blank (nothing
    but spaces, controls, separators and characters that show nothing: nothing said),
    or longer than :data:`MAX_REASON` characters.

    >>> require_reason("  GDPR Art. 17 request 42 ")
    'GDPR Art. 17 request 42'
    >>> require_reason("\u3164")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ledger.errors.ValidationError: reason: a reason is required ...
    """
    if isinstance(reason, str):
        require_text(reason, what)  # bytes that are not UTF-8 are not a missing reason
    if not isinstance(reason, str) or not visible_text(reason):
        raise ValidationError(
            f"{what}: a reason is required (say why, e.g. 'GDPR Art. 17 request #42'); "
            "nothing was changed"
        )
    if "\x00" in reason:
        raise ValidationError(f"{what}: a reason cannot hold a NUL character")
    said = reason.strip()
    if len(said) > MAX_REASON:
        raise ValidationError(
            f"{what}: {len(said):,} characters; a reason is at most {MAX_REASON:,} (an "
            "erasure keeps it in every row it erases): say why briefly and point to the "
            "case, e.g. 'GDPR Art. 17 request #42, see ticket DPO-1234'; nothing was changed"
        )
    return said


def visible_text(text: str) -> bool:
    """True when ``text`` shows something: a letter, a digit, a punctuation mark or a
    symbol, other than the ones that show nothing (Unicode's default-ignorable code
    points, such as the Hangul fillers, and the blank Braille pattern). Spaces,
    controls, format characters, private-use characters and combining marks with
    nothing to combine with say nothing.

    >>> visible_text("dpo"), visible_text("\u200b \u3164\u2800"), visible_text("\u0301")
    (True, False, False)
    """
    return any(map(_visible, text))


_SAYS = frozenset("LNPS")  # the first letter of a category that shows something
# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) that are
# not already of an unseen category, and U+2800 (the blank Braille pattern)
_SHOW_NOTHING = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip


def _visible(c: str) -> bool:
    if c.isspace() or unicodedata.category(c)[0] not in _SAYS:
        return False
    code = ord(c)
    return not any(low <= code <= high for low, high in _SHOW_NOTHING)


NO_REASON = "(no reason given)"


def reason_or_default(reason: object, what: str = "reason") -> str:
    """:func:`require_reason`, but ``None`` (none given) records :data:`NO_REASON`: a
    policy change or a hold's release need not say why (the log still records who and
    when); an erasure and a hold must, and a reason given blank is refused everywhere.

    >>> reason_or_default(None), reason_or_default("  case closed ")
    ('(no reason given)', 'case closed')
    """
    if reason is None:
        return NO_REASON
    if isinstance(reason, str) and not reason.strip():
        raise ValidationError(
            f"{what}: a reason, when given, must not be blank (leave it out to record "
            f"{NO_REASON!r}); nothing was changed"
        )
    return require_reason(reason, what)


def require_text(value: str, what: str) -> str:
    """``value``, or ``ValidationError`` when it is no Unicode text that UTF-8 can hold (a
    lone surrogate: what a command-line argument of bytes that are not UTF-8 becomes).

    >>> try:
    ...     require_text("GDPR \\udcff", "--reason")
    ... except ValidationError as exc:
    ...     print(str(exc).split(" (")[0])
    --reason: 'GDPR \\udcff' is not UTF-8 text
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{what}: {value!r} is not UTF-8 text (a byte or code point that UTF-8 cannot "
            "hold); give it as UTF-8; nothing was changed"
        ) from None
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A retention policy: ``keep`` and ``floor`` (``floor <= keep``), and the verifier
    keys (note key texts) whose signature a lowering of the floor needs."""

    keep: timedelta
    floor: timedelta = timedelta(0)
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("keep", "floor"):
            check_duration(getattr(self, name), what=name)  # as its record reads back
        if self.floor > self.keep:
            raise ValidationError(
                f"floor {format_duration(self.floor)} is longer than keep "
                f"{format_duration(self.keep)}: the floor is the least a record is kept, so "
                "it cannot exceed keep; raise --keep or lower --floor"
            )

    def cutoff(self, now: datetime) -> datetime | None:
        """Events at or after this time are inside the floor (cannot be erased); None
        when the floor is zero (it protects nothing: :func:`floor_cutoff`)."""
        return floor_cutoff(now, self.floor)

    def expired_before(self, now: datetime) -> datetime:
        """Events before this time are past ``keep`` (expired)."""
        return now - self.keep

    def to_dict(self) -> dict[str, object]:
        """Stable field names (``ledger retention show --json``)."""
        return {
            "keep": format_duration(self.keep),
            "floor": format_duration(self.floor),
            "keys": list(self.keys),
        }


def change_kind(old: Policy | None, new: Policy) -> str:
    """``"first"``, ``"same"``, ``"raise"`` (floor up or equal, keys unchanged or added
    to none) or ``"lower"`` (the floor goes down, or the policy keys change once some
    are set): a ``"lower"`` needs a signature by one of ``old``'s keys."""
    if old is None:
        return "first"
    if new == old:
        return "same"
    return "lower" if lowers(old.floor, old.keys, new.floor, new.keys) else "raise"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """A legal hold: a run, or the time range ``[since, until)`` (either end open), with
    a reason. ``released`` is set once it was released."""

    hold_id: str
    reason: str
    run_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    created: datetime | None = None
    created_by: str = ""
    released: datetime | None = None
    released_by: str = ""
    release_reason: str = ""

    def __post_init__(self) -> None:
        ranged = self.since is not None or self.until is not None
        if (self.run_id is None) == (not ranged):
            raise ValidationError(
                "a hold covers either a run (--run RUN_ID) or a time range (--since and/or "
                "--until), not both and not neither"
            )
        if self.run_id is not None and not isinstance(self.run_id, str):
            raise ValidationError(
                f"hold: the run id must be text (as `ledger runs` shows it), not "
                f"{type(self.run_id).__name__}"
            )
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise ValidationError(
                    f"hold: {name} must be a datetime with a time zone (e.g. "
                    f"datetime(2026, 1, 31, tzinfo=UTC)), not {value!r}"
                )
        if self.run_id is not None and not self.run_id:
            raise ValidationError("hold: the run id is empty")
        if isinstance(self.run_id, str):
            require_text(self.run_id, "--run")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValidationError(
                f"hold: empty time window: --since {format_time(self.since)} is not before "
                f"--until {format_time(self.until)} (since is inclusive, until exclusive)"
            )

    @property
    def active(self) -> bool:
        """True while the hold stands."""
        return self.released is None

    def covers(self, run_id: str, time: datetime) -> bool:
        """True when an event of ``run_id`` at ``time`` is under this (active) hold."""
        if not self.active:
            return False
        if self.run_id is not None:
            return run_id == self.run_id
        return (self.since is None or time >= self.since) and (
            self.until is None or time < self.until
        )

    def describe(self) -> str:
        """``run r1`` or ``2026-01-01T00:00:00Z .. (open)``."""
        if self.run_id is not None:
            return f"run {self.run_id}"
        start = format_time(self.since) if self.since else "(open)"
        end = format_time(self.until) if self.until else "(open)"
        return f"{start} .. {end}"

    def to_dict(self) -> dict[str, object]:
        """Stable field names (``ledger hold list --json``; times to the microsecond, as
        all machine output)."""
        from ledger.timefmt import format_time_us

        def t(v: datetime | None) -> str | None:
            return None if v is None else format_time_us(v)

        return {
            "id": self.hold_id,
            "run_id": self.run_id,
            "since": t(self.since),
            "until": t(self.until),
            "reason": self.reason,
            "created": t(self.created),
            "created_by": self.created_by,
            "active": self.active,
            "released": t(self.released),
            "released_by": self.released_by,
            "release_reason": self.release_reason,
        }


def refuse(message: str) -> RetentionError:
    """The error for a refused request (the message ends saying nothing changed)."""
    return RetentionError(f"{message}; nothing was changed")
