r"""What the gate records as a run id, call id, tool name or agent path: the value given,
redacted like everything else, then fitted to what the sink can store.

>>> from ledger.gate.redact import redact_secrets
>>> from ledger.sinks.base import KeyLimits
>>> pg = KeyLimits(nul=False, max_bytes=2048)
>>> recorded_name("deploy", "tool name", redact_secrets, pg)
RecordedName(value='deploy', redacted=False, refused='')
>>> recorded_name("tok=ghp_" + "a1B2" * 9, "tool name", redact_secrets, pg).value
'tok=[REDACTED]'
>>> name = recorded_name("rm" + chr(0) + "rf", "tool name", redact_secrets, pg)
>>> name.value, name.refused[:47]
('rm\\x00rf', 'the tool name holds a NUL (\\x00) character, whi')

A name the redactor changed is recorded redacted (``redacted``): a secret never reaches
the store through an identifier either. A name the sink cannot hold (a NUL character on
PostgreSQL, more bytes than an index entry holds, a lone surrogate anywhere) is recorded
escaped or cut (:meth:`~ledger.sinks.base.KeyLimits.fit`), and ``refused`` says so, with
the SHA-256 of the name as it would have been stored, so the record is marked and the
original can still be matched. The gate denies a call whose tool name or call id is
refused, and refuses a run whose run id or agent path is, before it starts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ledger.gate.redact import Redactor
from ledger.ids import new_event_id
from ledger.sinks.base import KeyLimits

__all__ = ["RecordedName", "recorded_name", "unique_name"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedName:
    """``value`` is what is recorded; ``redacted`` whether the redactor changed it;
    ``refused`` why the sink cannot hold it as given (``""`` when it can)."""

    value: str
    redacted: bool = False
    refused: str = ""


def recorded_name(value: str, what: str, redact: Redactor, limits: KeyLimits) -> RecordedName:
    """``value`` (a ``what``: "tool name", "run id"...) as the gate records it."""
    redacted = False
    try:
        clean = redact(value)
    except Exception as exc:  # never record it unredacted
        clean = f"[{what} withheld: redaction failed ({type(exc).__name__})]"
    if not isinstance(clean, str):
        clean = f"[{what} withheld: the redactor returned {type(clean).__name__}]"
    if clean != value:
        redacted = True
    problem = limits.problem(clean)
    if not problem:
        return RecordedName(value=clean, redacted=redacted)
    digest = hashlib.sha256(clean.encode("utf-8", "surrogatepass")).hexdigest()
    fitted = limits.fit(clean)
    how = "escaped and cut" if len(fitted) < len(clean) else "escaped"
    refused = f"the {what} {problem}; it is recorded {how} (sha256 of the {what}: {digest})"
    return RecordedName(value=fitted, redacted=redacted, refused=refused)


def unique_name(name: RecordedName, limits: KeyLimits) -> str:
    """The recorded form of a run id or call id: a redacted one gets a ``#<ULID>``
    suffix, so that two ids redacted alike stay two (cut first if the suffix would not
    fit); any other is its value."""
    if not name.redacted or name.refused:
        return name.value
    suffix = f"#{new_event_id()}"
    if not limits.problem(name.value + suffix):
        return name.value + suffix
    return name.value[: -len(suffix) - 1] + "…" + suffix
