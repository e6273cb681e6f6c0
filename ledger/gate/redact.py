"""Redaction: what the gate does to ``args``, ``preview`` and ``result`` before anything
is stored or hashed.

>>> redact_secrets({"path": "a.txt", "api_key": "sk-abc", "note": "Bearer eyJhbGciOi.x.y"})
{'path': 'a.txt', 'api_key': '[REDACTED]', 'note': 'Bearer [REDACTED]'}

A redactor is any callable ``redact(value) -> value`` over JSON-shaped values (dicts with
string keys, lists, strings, numbers, booleans, ``None``), so it sees everything that will
be written. Arguments must already be JSON (:func:`json_value` checks them; a call whose
args are not is denied, and its denied record shows :func:`marked_jsonable` placeholders
such as ``"[not JSON: object]"``); results are turned into that shape with
:func:`to_jsonable` (unknown objects become their ``str``, kept as text). If a redactor raises, the
gate denies the call rather than write a secret (for a result: the result is withheld and
the failure recorded instead).

:func:`redact_secrets` (the default) masks values under password-like keys (``password``,
``secret``, ``token``, ``api_key``, ``authorization``, ``private_key``, ``cookie``,
``credentials``...) and, inside any string: private-key blocks, bearer/basic
credentials, well-known API key formats (OpenAI/Anthropic ``sk-``, GitHub ``ghp_``/
``github_pat_``, GitLab, Slack tokens and webhook URLs, AWS access key ids, Google
``AIza``, Stripe, npm, Hugging Face), JWTs, ``password=...``-style pairs (also
``DB_PASSWORD=``, ``aws_secret_access_key =``, ``"token": "..."``), and the password of
``scheme://user:password@host`` URLs. Not caught: a secret with no recognizable shape and
no telling name next to it (a bare AWS secret key, a random hex string).
:func:`no_redaction` turns redaction off explicitly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = [
    "PREVIEW_LIMIT",
    "REDACTED",
    "NotJSON",
    "Redactor",
    "bounded",
    "json_value",
    "marked_jsonable",
    "no_redaction",
    "redact_secrets",
    "redact_text",
    "to_jsonable",
]

REDACTED = "[REDACTED]"
PREVIEW_LIMIT = 200
"""Maximum length, in characters, of any ``preview`` the gate writes."""

Redactor: TypeAlias = Callable[[Any], Any]

_KEY_SUFFIXES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secretkey",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "sessionid",
)
_KEY_NOISE = str.maketrans("", "", "-_. ")

_PRIVATE_KEY = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
    r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|.*\Z)"
)
_TOKENS = "|".join(
    (
        r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"\bglpat-[A-Za-z0-9_\-]{20,}",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        r"\bAIza[0-9A-Za-z_\-]{35}",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
        r"\bnpm_[A-Za-z0-9]{36}",
        r"\bhf_[A-Za-z0-9]{30,}",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/\-]+",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    )
)


def _mask_value(match: re.Match[str]) -> str:
    """The replacement of one ``key=value`` pair: the key kept, the value masked (inside
    its quotes when it was quoted)."""
    head, value = match.group(1), match.group(0)[len(match.group(1)) :]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{head}{quote}{REDACTED}{quote}"


_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(_PRIVATE_KEY, re.DOTALL), REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9\-._~+/]{8,}=*"), r"\1\2" + REDACTED),
    (re.compile(_TOKENS), REDACTED),
    (
        # key=value / key: value pairs, the key possibly prefixed (DB_PASSWORD,
        # aws_secret_access_key, clientSecret); a quoted value keeps its quotes.
        re.compile(
            r"(?i)(\b[A-Za-z0-9_.\-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|"
            r"access[_-]?key|private[_-]?key|credentials?)\b[\"']?\s*[:=]\s*)"
            r"(?:\"[^\"]*\"|'[^']*'|([^\s,;&\"'}]+))"
        ),
        _mask_value,
    ),
    (
        re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)([^@\s/]+)(@)"),
        r"\1" + REDACTED + r"\3",
    ),
)
# A cheap pre-check on the lowercased text: most strings match none, and skip every regex.
_HINT = re.compile(
    r"key|pass|secret|token|bearer|basic|://|sk-|_live_|_test_|gh[pousr]_|github_pat|glpat|"
    r"xox|akia|asia|aiza|npm_|hf_|eyj|private|credential"
)


def sensitive_key(key: str) -> bool:
    """True when a mapping key names a secret (``api_key``, ``X-Auth-Token``...)."""
    norm = key.lower().translate(_KEY_NOISE)
    return norm.endswith(_KEY_SUFFIXES)


def redact_text(text: str) -> str:
    """Mask the secrets found inside one string (see the module docstring)."""
    if _HINT.search(text.lower()) is None:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_secrets(value: Any) -> Any:
    """The default redactor: a copy of ``value`` with common secrets masked.

    Strings under a password-like key become ``"[REDACTED]"`` whole (as do containers
    under such a key); numbers, booleans and ``None`` there are kept (``max_tokens: 100``
    is not a secret). Every other string is scanned with :func:`redact_text`.
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and sensitive_key(key) and _maskable(item):
                out[key] = REDACTED
            else:
                out[key] = redact_secrets(item)
        return out
    if isinstance(value, list | tuple):
        return [redact_secrets(item) for item in value]
    return value


def _maskable(item: Any) -> bool:
    return item is not None and not isinstance(item, bool | int | float)


def no_redaction(value: Any) -> Any:
    """The redactor that changes nothing: ``Gate(sink, redact=no_redaction)``."""
    return value


_INT64 = 1 << 63


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON-shaped data: dict keys become strings, tuples and sets lists,
    bytes text, integers beyond 64 bits and unknown objects their ``str`` (a ``str``
    that raises is named instead); text that is not valid Unicode (lone surrogates, as
    ``os.listdir`` returns for undecodable file names) keeps them as ``\\udcff`` escapes."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, str):
        return _unicode(value)
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else str(value)
    if _depth > 64:
        return "[too deeply nested]"
    if isinstance(value, dict):
        return {_unicode(str(k)): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return _unicode(str(value))
    except Exception as exc:  # a broken __str__ must not cost the record
        return f"[unprintable {type(value).__name__}: str() raised {type(exc).__name__}]"


def _unicode(text: str) -> str:
    """``text``, with any lone surrogate written as a ``\\uXXXX`` escape."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class NotJSON(ValueError):
    """A value that is not JSON: ``what`` was found at ``path`` (the keys and indexes
    from the outside in; empty for the value itself)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self._inside_out: list[str | int] = []

    @property
    def path(self) -> list[str | int]:
        return self._inside_out[::-1]

    @property
    def where(self) -> str:
        """The path as Python subscripts: ``"['p'][0]"``."""
        return "".join(f"[{key!r}]" for key in self.path)


def _what(value: Any) -> str:
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, int):
        return "an integer beyond 64 bits"
    return type(value).__name__


def json_value(value: Any, _depth: int = 0) -> Any:
    """``value`` unchanged if it is JSON (tuples become lists), else :class:`NotJSON`.

    JSON here: ``None``, ``bool``, ``str``, ``int`` within 64 bits, finite ``float``, and
    lists, tuples and dicts with string keys of those, at most 64 levels deep (so a cycle
    is refused too). Subclasses (a ``StrEnum`` member) count as their base type.
    """
    if value is None or isinstance(value, str):  # bool: an int, checked next
        return value
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return value
        raise NotJSON(_what(value))
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NotJSON(_what(value))
    if not isinstance(value, dict | list | tuple):
        raise NotJSON(_what(value))
    if _depth >= 64:
        raise NotJSON("nested more than 64 levels deep (a cycle?)")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJSON(f"a dict with a {type(key).__name__} key")
            try:
                out[key] = json_value(item, _depth + 1)
            except NotJSON as exc:
                exc._inside_out.append(key)
                raise
        return out
    items = []
    for index, item in enumerate(value):
        try:
            items.append(json_value(item, _depth + 1))
        except NotJSON as exc:
            exc._inside_out.append(index)
            raise
    return items


def marked_jsonable(value: Any, _depth: int = 0) -> Any:
    """Like :func:`to_jsonable`, but what is not JSON becomes a placeholder
    ``"[not JSON: <type>]"`` (the record of a call denied for such args)."""
    try:
        return json_value(value, 64)  # scalars only: fast for the JSON ones
    except NotJSON as exc:
        if not isinstance(value, dict | list | tuple) or _depth > 64:
            return f"[not JSON: {exc.what}]"
    if isinstance(value, dict):
        return {str(k): marked_jsonable(v, _depth + 1) for k, v in value.items()}
    return [marked_jsonable(v, _depth + 1) for v in value]


def bounded(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
