"""Redaction: what the gate does to everything it records before it is stored or hashed.

>>> redact_secrets({"path": "a.txt", "api_key": "sk-abc", "note": "Bearer eyJhbGciOi.x.y"})
{'path': 'a.txt', 'api_key': '[REDACTED]', 'note': 'Bearer [REDACTED]'}
>>> redact_secrets({"ghp_" + "x1Y2" * 9: "admin", "args": ["--password", "hunter2"]})
{'[REDACTED]': 'admin', 'args': ['--password', '[REDACTED]']}

A redactor is any callable ``redact(value) -> value`` over JSON-shaped values (dicts with
string keys, lists, strings, numbers, booleans, ``None``), so it sees everything that will
be written: the request, the arguments, results, reasons, error messages, and the
identifiers the gate records (tool name, run id, call id, agent path, ref ids), which it
is given as strings. If a redactor raises, the gate denies the call rather than write a
secret (for a result: the result is withheld and the failure recorded instead).

:func:`redact_secrets` (the default), in time linear in the size of the value:

- **keys**: the value under a key whose name ends in a key word (``password``, ``pwd``,
  ``secret``, ``token``, ``api_key``, ``auth``, ``authorization``, ``cookie``,
  ``credentials``, ``private_key``, ``session``, ``pin``... see
  :mod:`ledger.gate.formats`) becomes ``"[REDACTED]"``, whatever it is (a number too;
  ``true``/``false``/``null`` are kept); so does ``value`` beside ``name``/``key`` naming
  a secret (``{"name": "DB_PASSWORD", "value": ...}``). A key that itself holds a secret
  is redacted like any text (made unique with ``#2``... when two keys collide).
- **lists**: the item after a flag naming a secret (``["--password", "x"]``,
  ``["-u", "user:password"]``).
- **text**: every string is scanned by :func:`redact_text` (private keys, credential
  formats, ``key=value`` pairs, headers, XML, URLs, flags: see :mod:`ledger.gate.detect`).

What it cannot catch, by design: a secret with no recognisable shape and no telling name
next to it (a bare random string, a bare AWS secret key, a hex API key), a secret split
across strings or encoded (base64, URL-encoding of the whole, hex), and names it does
not know. Give the gate your own redactor for those (``redact=lambda v: mine(
redact_secrets(v))``). :func:`no_redaction` turns redaction off explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from ledger.gate.detect import REDACTED, flag_names_secret, mask_secrets, sensitive_key

__all__ = ["REDACTED", "Redactor", "no_redaction", "redact_secrets", "redact_text"]

Redactor: TypeAlias = Callable[[Any], Any]

_NAME_KEYS = ("name", "Name", "NAME", "key", "Key", "KEY")
_VALUE_KEYS = ("value", "Value", "VALUE")


def redact_text(text: str) -> str:
    """Mask the secrets found inside one string (see :mod:`ledger.gate.detect`).

    >>> redact_text("postgres://app:p@ss@db/prod and token=abc")
    'postgres://app:[REDACTED]@db/prod and token=[REDACTED]'
    """
    return mask_secrets(text)


def redact_secrets(value: Any) -> Any:
    """The default redactor: a copy of ``value`` with common secrets masked (see the
    module notes for what is and is not caught). The input is not changed."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, dict):
        return _redact_dict(value)
    if isinstance(value, list | tuple):
        return _redact_list(value)
    return value


def _redact_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    named = _names_a_secret(value)
    for key, item in value.items():
        secret = (isinstance(key, str) and sensitive_key(key)) or (named and key in _VALUE_KEYS)
        clean = _masked(item) if secret else redact_secrets(item)
        if isinstance(key, str):
            new = mask_secrets(key)
            if new != key:
                key = _unique(new, out, value)
        out[key] = clean
    return out


def _names_a_secret(value: dict[Any, Any]) -> bool:
    """``{"name": "DB_PASSWORD", "value": ...}``: a name/value pair naming a secret."""
    if not any(k in value for k in _VALUE_KEYS):
        return False
    return any(isinstance(value.get(k), str) and sensitive_key(value[k]) for k in _NAME_KEYS)


def _unique(key: str, out: dict[Any, Any], original: dict[Any, Any]) -> str:
    """``key``, or ``key#2``, ``key#3``...: a redacted key must not overwrite another."""
    candidate, n = key, 1
    while candidate in out or candidate in original:
        n += 1
        candidate = f"{key}#{n}"
    return candidate


def _masked(item: Any) -> Any:
    """What a value under a secret's name becomes: ``true``/``false``/``null`` say
    nothing and are kept; anything else (text, numbers, containers) is masked."""
    return item if item is None or isinstance(item, bool) else REDACTED


def _redact_list(items: list[Any] | tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    flag = ""
    for item in items:
        if flag and isinstance(item, str):
            out.append(_after_flag(flag, item))
            flag = ""
            continue
        flag = item if isinstance(item, str) and flag_names_secret(item) else ""
        out.append(redact_secrets(item))
    return out


def _after_flag(flag: str, item: str) -> str:
    if flag in ("-u", "--user"):
        user, colon, _ = item.partition(":")
        return f"{mask_secrets(user)}:{REDACTED}" if colon else mask_secrets(item)
    return REDACTED


def no_redaction(value: Any) -> Any:
    """The redactor that changes nothing: ``Gate(sink, redact=no_redaction)``."""
    return value
