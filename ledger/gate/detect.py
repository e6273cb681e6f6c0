"""Finding secrets inside one string, in time linear in its length, whatever it holds.

>>> mask_secrets("export DB_PASSWORD=hunter2 GITHUB=ghp_" + "a1B2" * 9)
'export DB_PASSWORD=[REDACTED] GITHUB=[REDACTED]'
>>> mask_secrets("Authorization: token 0123abcd  ")
'Authorization: token [REDACTED]'
>>> sensitive_key("userPwd"), sensitive_key("bypass"), sensitive_key("X-Auth-Token")
(True, False, True)

First a necessary condition (one literal search on the text, one on its lowercased copy)
lets text that holds no pattern's literal skip every pass. The passes, in order (each one
regular expression, run once over the text):

1. private-key blocks (PEM ``-----BEGIN ... PRIVATE KEY-----`` to its ``END`` line, or to
   the end of the text when there is none; PGP ``PRIVATE KEY BLOCK``; PuTTY key files);
2. credential formats (:data:`~ledger.gate.formats.TOKEN_FORMATS`), also when glued to
   preceding letters (except the few whose prefix is a common word part), and Azure AD
   client secrets (``<3 chars><digit>Q~...``);
3. ``key=value`` / ``key: value`` / ``key := value`` / ``"key": "value"`` pairs whose key
   ends in a key word (:mod:`ledger.gate.formats`): env files, query strings, JSON or
   Python text inside a string (also escaped once, ``\"password\": \"x\"``), YAML
   (block scalars too), INI/TOML, XML attributes, headers, cookies. After ``=`` an unquoted
   value ends at white space or one of ``,;&"'<>{}]``; after ``:`` it runs to the end of
   the line or one of ``,;"'}`` (so ``Authorization: token abc`` is masked whole, its
   scheme word kept);
4. ``Bearer``/``Basic`` credentials anywhere (after the pairs, so that a key word after
   them is seen as a key);
5. XML elements named so (``<password>...</password>``, ``<db:adminPassword>``, CDATA);
6. ``key="password" value="..."`` / ``name="..." value="..."`` attribute pairs, and
   ``<entry key="api_token">...</entry>``;
7. the password of ``scheme://user:password@host`` (to the last ``@`` of the authority,
   so a password holding ``@`` is masked whole);
8. command-line flags: ``--password VALUE``, ``--api-key VALUE``, ``-u user:password``.

Why linear: every pattern begins with a literal (or a short bounded piece), every
unbounded part is possessive (``*+``, ``++``: no backtracking into it), and what follows
an unbounded part can no longer fail once that part matched (or the part is made
optional and the match checked afterwards). So an attempt either fails within a bounded
number of characters or succeeds and consumes what it scanned, and no character is
scanned by more than a bounded number of attempts of one pass. (One exception, also
linear: a URL password backtracks to the last ``@`` of its authority, which ends at the
next ``/``, ``?``, ``#`` or space, so no other attempt of that pass scans it again.)
``benchmarks/gate.py`` measures it against ``str.lower`` on adversarial texts at two
sizes; the tests check the output, also on generated hostile text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ledger.gate.formats import KEY_WORDS, SHORT_KEY_WORDS, TOKEN_FORMATS

__all__ = ["REDACTED", "flag_names_secret", "mask_secrets", "sensitive_key"]

REDACTED = "[REDACTED]"

_SCHEMES = frozenset(
    (
        "bearer", "basic", "token", "digest", "negotiate", "ntlm", "hmac", "apikey", "otp",
        "sso-key", "gsso", "mac", "oauth", "key", "aws4-hmac-sha256", "splunk",
    )
)  # fmt: skip


def _trie(branches: list[tuple[str, str]]) -> str:
    """An alternation over ``(literal prefix, tail regex)`` branches with shared prefixes
    factored out, so one position costs a walk down one path, not a try of every
    branch; at a node, longer prefixes are tried before the node's own tails."""
    children: dict[str, list[tuple[str, str]]] = {}
    tails: list[str] = []
    for prefix, tail in branches:
        if prefix:
            children.setdefault(prefix[0], []).append((prefix[1:], tail))
        else:
            tails.append(tail)
    parts = [re.escape(c) + _trie(sub) for c, sub in sorted(children.items())] + tails
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _token_pattern() -> tuple[re.Pattern[str], dict[str, str]]:
    """One trie over every format's prefixes; each format's tail is a named group, so
    the replacement knows which format matched (and which need a check)."""
    branches: list[tuple[str, str]] = []
    checks: dict[str, str] = {}
    for i, fmt in enumerate(TOKEN_FORMATS):
        bound = f"{{{fmt.min},{'' if fmt.max is None else fmt.max}}}+"
        body = f"[{fmt.body}]{bound}"
        if fmt.check == "jwt":  # the dotted parts are optional, checked afterwards
            body += r"(?:\.[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]*+)?"
        for j, prefix in enumerate(fmt.prefixes):
            name = f"f{i}_{j}"
            # not glued: no letter or digit right before the prefix (a lookbehind after
            # it, so the branch still starts with its literal)
            guard = "" if fmt.glued else f"(?<![A-Za-z0-9]{re.escape(prefix)})"
            branches.append((prefix, f"(?P<{name}>{guard}{body})"))
            if fmt.check:
                checks[name] = fmt.check
    return re.compile(_trie(branches)), checks


# --- key words -----------------------------------------------------------------------
# Key words are matched on a lowercased copy of the text (ASCII letters folded, so every
# offset is the same as in the original), which keeps the patterns free of IGNORECASE
# and lets each attempt start with a literal; camel-case short words (``userPwd``) need
# the original letter case and have a pattern of their own.


def _key_trie() -> tuple[str, str]:
    """The key-word patterns: (lowercase, any word; camel-case short words)."""
    low = [(w, "") for w in KEY_WORDS] + [
        (w, f"(?<![a-z0-9]{re.escape(w)})")
        for w in SHORT_KEY_WORDS  # at a word start
    ]
    camel = [(w.capitalize(), f"(?<=[a-z]{re.escape(w.capitalize())})") for w in SHORT_KEY_WORDS]
    return _trie(low), _trie(camel)


_KEY_LOW, _KEY_CAMEL = _key_trie()
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZÑ", "abcdefghijklmnopqrstuvwxyzñ")


def _lower(text: str) -> str:
    """``text`` with its ASCII letters (and Ñ) lowercased: same length, same offsets."""
    return text.lower() if text.isascii() else text.translate(_LOWER)


_KEY_LOW_END = re.compile(f"(?:{_KEY_LOW})\\Z")
_KEY_CAMEL_END = re.compile(f"(?:{_KEY_CAMEL})\\Z")


def sensitive_key(key: str) -> bool:
    """True when a key name ends in a key word (``api_key``, ``DB_PASSWORD``, ``pwd``,
    ``userPwd``), in any letter case; a short word only at a word start (not ``bypass``)."""
    tail = key[-64:]
    return bool(_KEY_LOW_END.search(_lower(tail)) or _KEY_CAMEL_END.search(tail))


_FLAG = re.compile(r"--?[A-Za-z0-9_\-]{0,60}+")


def flag_names_secret(text: str) -> bool:
    """True when ``text`` is a command-line flag naming a secret (``--password``,
    ``--api-key``, ``-u``): the next argument is the secret."""
    if text in ("-u", "--user"):
        return True
    return _FLAG.fullmatch(text) is not None and sensitive_key(text.lstrip("-"))


# --- the passes ----------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[^-]++|-(?!----END[ A-Z0-9]{0,40}PRIVATE KEY))*+"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
    r"|PuTTY-User-Key-File-\d{1,2}:(?:[^P]++|P(?!rivate-MAC:))*+(?:Private-MAC:[^\r\n]*+)?"
)


_TOKENS, _TOKEN_CHECKS = _token_pattern()


def _random_looking(text: str) -> bool:
    """A generated key mixes digits with upper- and lowercase letters; words do not."""
    return (
        any(c.isdigit() for c in text)
        and any(c.isupper() for c in text)
        and any(c.islower() for c in text)
    )


def _token_repl(m: re.Match[str]) -> str:
    check = _TOKEN_CHECKS.get(m.lastgroup or "", "")
    text = m.group()
    if check == "jwt" and "." not in text:
        return text
    if check == "random" and not _random_looking(text[3:]):
        return text
    return REDACTED


def _at_word_start(words: list[str]) -> str:
    """An alternation of ``words`` each not preceded by a letter or digit (checked by a
    lookbehind after the word, so each alternative starts with its literal)."""
    return "(?:" + "|".join(f"{re.escape(w)}(?<![A-Za-z0-9]{re.escape(w)})" for w in words) + ")"


_AUTH_SCHEME = re.compile(
    "(" + _at_word_start([v for w in ("bearer", "basic") for v in (w, w.capitalize(), w.upper())])
    + r")([ \t]++)[A-Za-z0-9\-._~+/]{8,}+=*+"
)  # fmt: skip

_VALUE = (
    r"(?P<done>(?i:\[REDACTED\]))"  # already masked (redacting twice changes nothing)
    r"|(?P<dq>\\{0,3}\")(?P<dqv>[^\"\n]*+)(?P<dqe>\"?)"
    r"|(?P<sq>\\{0,3}')(?P<sqv>[^'\n]*+)(?P<sqe>'?)"
    r"|(?P<block>[|>][+\-0-9]{0,2}[ \t]*+\n)(?P<blockv>(?:[ \t]++[^\n]*+(?:\n|\Z))++)"
    # after ':' (YAML, headers, prose) an unquoted value runs to the end of the line
    r"|(?(colon)(?P<line>[^\r\n,;\"'}]++)|(?P<bare>[^\s,;&\"'<>{}\]]++))"
)
_PAIR_TAIL = (
    r"(?P<sep>(?:\\{0,3}[\"'])?\]?[ \t]*+(?::=|=>|==|(?P<colon>:)|=)[ \t]*+)(?:" + _VALUE + ")"
)
_PAIR_LOW = re.compile(f"(?P<key>{_KEY_LOW}){_PAIR_TAIL}")
_PAIR_CAMEL = re.compile(f"(?P<key>{_KEY_CAMEL}){_PAIR_TAIL}")


def _pair_pass(text: str) -> str:
    """Mask the values of ``key=value`` pairs whose key ends in a key word."""
    text = _replace(_PAIR_LOW, _lower(text), text)
    return _replace(_PAIR_CAMEL, text, text)


def _replace(pattern: re.Pattern[str], searched: str, text: str) -> str:
    """``pattern`` found in ``searched`` (``text`` or its lowercased copy, same offsets),
    each pair in ``text`` replaced by :func:`_pair_repl`."""
    out: list[str] = []
    done = 0
    for m in pattern.finditer(searched):
        out.append(text[done : m.start()])
        out.append(_pair_repl(m, text))
        done = m.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _pair_repl(m: re.Match[str], text: str) -> str:
    def part(name: str) -> str:
        return text[m.start(name) : m.end(name)]

    head = text[m.start() : m.end("sep")]
    if m.start("done") >= 0:
        return head + REDACTED
    if m.start("dq") >= 0:
        return head + _quoted(part("dq"), part("dqv"), part("dqe"))
    if m.start("sq") >= 0:
        return head + _quoted(part("sq"), part("sqv"), part("sqe"))
    if m.start("block") >= 0:
        block = part("blockv")
        indent = block[: len(block) - len(block.lstrip(" \t"))]
        return f"{head}{part('block')}{indent}{REDACTED}\n"
    if m.start("line") >= 0:  # keep a leading scheme word: "Authorization: token [REDACTED]"
        line = part("line")
        word, space, rest = line.partition(" ")
        if space and rest.strip() and word.lower() in _SCHEMES:
            return f"{head}{word} {REDACTED}"
        return head + REDACTED + line[len(line.rstrip()) :]
    return head + REDACTED


def _quoted(open_: str, value: str, close: str) -> str:
    if not value.strip():
        return open_ + value + close
    escapes = value[len(value.rstrip("\\")) :] if close else ""  # \" closes an escaped one
    return f"{open_}{REDACTED}{escapes}{close}"


_XML = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.\-:]{0,80}+)(?:\s[^<>]*+)?>"
    r"(?P<body><!\[CDATA\[(?:[^\]]++|\](?!\]>))*+(?:\]\]>)?|[^<]*+)"
)


def _xml_repl(m: re.Match[str]) -> str:
    if not m.group("body").strip() or not sensitive_key(m.group("tag")):
        return m.group()
    return m.group()[: m.start("body") - m.start()] + REDACTED


_NAMED = re.compile(
    _at_word_start(["key", "Key", "KEY", "name", "Name", "NAME"])
    + r"[ \t]*+=[ \t]*+(?P<q>[\"'])(?P<name>[^\"'\n<>]{1,80}+)(?P=q)"
    r"(?P<mid>[ \t\r\n]++(?:value|Value|VALUE)[ \t]*+=[ \t]*+(?P<q2>[\"'])|[^<>\"']{0,200}+>)"
    r"(?P<value>[^\"'<\n]*+)"
)


def _named_repl(m: re.Match[str]) -> str:
    if not m.group("value").strip() or not sensitive_key(m.group("name")):
        return m.group()
    return m.group()[: m.start("value") - m.start()] + REDACTED


_USERINFO = re.compile(r"(?P<head>://[^\s/?#@:]*+:)(?P<pw>[^\s/?#]*)@")


def _userinfo_repl(m: re.Match[str]) -> str:
    if not m.group("pw"):
        return m.group()
    return f"{m.group('head')}{REDACTED}@"


_FLAGS = re.compile(
    r"(?P<flag>-(?<![\w\-]-)-?[A-Za-z0-9_\-]{1,64}+)[ \t]++"
    r"(?P<value>\"[^\"\n]*+\"?|'[^'\n]*+'?|(?!-)[^\s\"']++)"
)
_USER_FLAG = re.compile(r"\A(?P<user>[^:]*+):(?P<pw>.+)\Z", re.DOTALL)


def _flag_repl(m: re.Match[str]) -> str:
    flag, value = m.group("flag"), m.group("value")
    if not flag_names_secret(flag):
        return m.group()
    quote = value[0] if value[:1] in "\"'" else ""
    inner = value[len(quote) : len(value) - (1 if quote and value.endswith(quote) else 0)]
    if flag in ("-u", "--user"):  # curl: -u user:password
        split = _USER_FLAG.match(inner)
        if split is None:
            return m.group()
        inner = f"{split.group('user')}:{REDACTED}"
    else:
        inner = REDACTED
    close = quote if quote and value.endswith(quote) and len(value) > 1 else ""
    return m.group()[: m.start("value") - m.start()] + quote + inner + close


_AZURE = re.compile(r"\dQ~[A-Za-z0-9_~.\-]{31,34}+")
_AZURE_HEAD = re.compile(r"[A-Za-z0-9_~.]{3}\Z")


def _azure_pass(text: str) -> str:
    """Azure AD client secrets (``xxx8Q~...``): found by their ``<digit>Q~`` and masked
    with the three characters before it."""
    out: list[str] = []
    done = 0
    for m in _AZURE.finditer(text):
        start = m.start()
        if start >= 3 and _AZURE_HEAD.search(text, start - 3, start):
            out.append(text[done : max(done, start - 3)])
            out.append(REDACTED)
            done = m.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


_PASSES: tuple[Callable[[str], str], ...] = (
    lambda t: _PRIVATE_KEY.sub(REDACTED, t),
    lambda t: _TOKENS.sub(_token_repl, t),
    _azure_pass,
    _pair_pass,  # before the bare schemes: "Bearer\npassword=x" is a pair
    lambda t: _AUTH_SCHEME.sub(lambda m: m.group(1) + m.group(2) + REDACTED, t),
    lambda t: _XML.sub(_xml_repl, t),
    lambda t: _NAMED.sub(_named_repl, t),
    lambda t: _USERINFO.sub(_userinfo_repl, t),
    lambda t: _FLAGS.sub(_flag_repl, t),
)


# A necessary condition for any pass to find something, in two searches: a literal that
# starts a pass's pattern (case-sensitive), or a key word (on the lowercased text). Most
# short text has neither, and skips every pass; long text goes straight to the passes
# (the searches could scan it all only to find a key word at its end).
_HINTED = 4096
_HINT_CASED = re.compile(
    _trie(
        [(p, "") for f in TOKEN_FORMATS for p in f.prefixes]
        + [(p, "") for p in ("-----BEGIN", "PuTTY-User-Key-File-", "Q~", "://", "<")]
    )
)
_HINT_LOWER = re.compile(
    _trie(
        [(w, "") for w in (*KEY_WORDS, *SHORT_KEY_WORDS)]
        + [(w, "") for w in ("bearer", "basic", "key", "name", "-u", "--user")]
    )
)


def mask_secrets(text: str) -> str:
    """``text`` with every secret the passes above find replaced by ``[REDACTED]``."""
    if (
        len(text) <= _HINTED
        and _HINT_CASED.search(text) is None
        and _HINT_LOWER.search(_lower(text)) is None
    ):
        return text
    for apply in _PASSES:
        text = apply(text)
    return text
