"""The credential formats the default redactor recognises by their shape alone, and the
key names whose values it masks whatever they look like.

>>> [f.name for f in TOKEN_FORMATS][:3]
['aws-access-key-id', 'github-token', 'github-fine-grained-pat']
>>> "password" in KEY_WORDS and "pwd" in SHORT_KEY_WORDS
True

A :class:`TokenFormat` is one or more literal prefixes followed by a body of at least
``min`` characters of one class (``max`` bounds it when the format has a fixed length).
The formats are those published by the providers and recognised by secret scanners
such as gitleaks and detect-secrets. ``glued`` formats are found even when letters
precede them (``tokenghp_...``): their prefix is distinctive. The others need a
non-alphanumeric character (or the start of the text) before them, and ``check``
names an extra test of the whole match (see :mod:`ledger.gate.detect`).

Key words are lowercase words matched in any letter case at the END of a key name
(``DB_PASSWORD``, ``clientSecret``, ``x-auth-token``). :data:`KEY_WORDS` match
even glued to what precedes them (``dbpassword``); :data:`SHORT_KEY_WORDS` only at a word
start: after a non-alphanumeric character or as a capitalised camel-case part
(``userPwd`` yes, ``bypass`` no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["HEADER_KEY_WORDS", "KEY_WORDS", "SHORT_KEY_WORDS", "TOKEN_FORMATS", "TokenFormat"]

_B64URL = "A-Za-z0-9_\\-"
_ALNUM = "A-Za-z0-9"


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenFormat:
    """One credential format: ``prefixes`` then ``min``..``max`` characters of ``body``
    (a character-class body, without brackets)."""

    name: str
    prefixes: tuple[str, ...]
    body: str
    min: int
    max: int | None = None
    glued: bool = True
    check: Literal["", "random", "jwt"] = ""


TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    TokenFormat(
        name="aws-access-key-id",
        prefixes=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        body="A-Z0-9",
        min=16,
        max=17,
    ),
    TokenFormat(
        name="github-token",
        prefixes=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        body=_ALNUM,
        min=30,
    ),
    TokenFormat(
        name="github-fine-grained-pat", prefixes=("github_pat_",), body=_ALNUM + "_", min=20
    ),
    TokenFormat(
        name="gitlab-token",
        prefixes=(
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glsoat-",
            "gloas-",
            "glimt-",
            "glagent-",
            "glffct-",
            "glft-",
            "GR1348941",
        ),
        body=_B64URL,
        min=20,
    ),
    TokenFormat(
        name="slack-token",
        prefixes=("xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-", "xoxo-", "xoxe-", "xapp-"),
        body=_ALNUM + "\\-.",
        min=10,
    ),
    TokenFormat(
        name="slack-webhook",
        prefixes=("hooks.slack.com/services/", "hooks.slack.com/workflows/"),
        body=_B64URL + "/",
        min=8,
    ),
    TokenFormat(
        name="stripe-key",
        prefixes=("sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_", "whsec_"),
        body=_ALNUM,
        min=10,
    ),
    TokenFormat(
        name="anthropic-or-openai-key",
        prefixes=("sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"),
        body=_B64URL,
        min=20,
    ),
    TokenFormat(
        name="openai-style-key",
        prefixes=("sk-",),
        body=_B64URL,
        min=20,
        glued=False,
        check="random",
    ),
    TokenFormat(name="google-api-key", prefixes=("AIza",), body=_B64URL, min=35),
    TokenFormat(name="google-oauth", prefixes=("GOCSPX-", "ya29."), body=_B64URL, min=20),
    TokenFormat(name="google-refresh-token", prefixes=("1//0",), body=_B64URL, min=30, glued=False),
    TokenFormat(name="sendgrid-key", prefixes=("SG.",), body=_B64URL + ".", min=40, glued=False),
    TokenFormat(name="mailgun-key", prefixes=("key-",), body="0-9a-z", min=32, max=32, glued=False),
    TokenFormat(
        name="twilio-api-key", prefixes=("SK",), body="0-9a-fA-F", min=32, max=32, glued=False
    ),
    TokenFormat(name="npm-token", prefixes=("npm_",), body=_ALNUM, min=36),
    TokenFormat(name="pypi-token", prefixes=("pypi-AgEIcHlwaS5vcmc",), body=_B64URL, min=40),
    TokenFormat(name="huggingface-token", prefixes=("hf_",), body=_ALNUM, min=30),
    TokenFormat(
        name="digitalocean-token", prefixes=("dop_v1_", "doo_v1_", "dor_v1_"), body="a-f0-9", min=64
    ),
    TokenFormat(
        name="shopify-token",
        prefixes=("shpat_", "shpca_", "shppa_", "shpss_"),
        body="a-fA-F0-9",
        min=32,
    ),
    TokenFormat(name="databricks-token", prefixes=("dapi",), body="a-f0-9", min=32, glued=False),
    TokenFormat(name="vault-token", prefixes=("hvs.", "hvb.", "hvr."), body=_B64URL, min=24),
    TokenFormat(name="terraform-token", prefixes=("atlasv1.",), body=_B64URL + "=", min=40),
    TokenFormat(name="atlassian-token", prefixes=("ATATT3", "ATCTT3"), body=_B64URL + "=", min=60),
    TokenFormat(name="linear-key", prefixes=("lin_api_",), body=_ALNUM, min=40),
    TokenFormat(name="postman-key", prefixes=("PMAK-",), body="a-fA-F0-9\\-", min=40),
    TokenFormat(name="grafana-token", prefixes=("glc_", "glsa_"), body=_ALNUM + "_+/=", min=32),
    TokenFormat(name="newrelic-key", prefixes=("NRAK-", "NRJS-", "NRII-"), body="A-Z0-9", min=27),
    TokenFormat(name="doppler-token", prefixes=("dp.pt.", "dp.st.", "dp.sa."), body=_ALNUM, min=40),
    TokenFormat(name="age-secret-key", prefixes=("AGE-SECRET-KEY-1",), body="0-9A-Z", min=58),
    TokenFormat(name="square-token", prefixes=("sq0atp-", "sq0csp-", "EAAA"), body=_B64URL, min=22),
    TokenFormat(name="heroku-key", prefixes=("HRKU-",), body=_B64URL, min=40),
    TokenFormat(name="figma-token", prefixes=("figd_",), body=_B64URL, min=40),
    TokenFormat(name="sentry-token", prefixes=("sntrys_", "sntryu_"), body=_ALNUM + "_+/=", min=40),
    TokenFormat(name="pulumi-token", prefixes=("pul-",), body="a-f0-9", min=40, glued=False),
    TokenFormat(name="supabase-token", prefixes=("sbp_",), body="a-f0-9", min=40),
    TokenFormat(name="replicate-token", prefixes=("r8_",), body=_ALNUM, min=37, glued=False),
    TokenFormat(name="groq-key", prefixes=("gsk_",), body=_ALNUM, min=40),
    TokenFormat(name="xai-key", prefixes=("xai-",), body=_ALNUM, min=60, glued=False),
    TokenFormat(name="perplexity-key", prefixes=("pplx-",), body=_ALNUM, min=40),
    TokenFormat(name="mapbox-secret-token", prefixes=("sk.eyJ",), body=_B64URL + ".", min=40),
    TokenFormat(name="jwt", prefixes=("eyJ",), body=_B64URL, min=8, glued=False, check="jwt"),
    TokenFormat(  # base64 of a PEM private key (kubeconfig client-key-data, k8s secrets)
        name="base64-private-key",
        prefixes=(
            "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0t",  # -----BEGIN RSA PRIVATE KEY-----
            "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t",  # -----BEGIN PRIVATE KEY-----
            "LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0t",  # OPENSSH PRIVATE KEY
            "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t",  # EC PRIVATE KEY
            "LS0tLS1CRUdJTiBFTkNSWVBURUQgUFJJVkFURSBLRVktLS0t",  # ENCRYPTED PRIVATE KEY
            "LS0tLS1CRUdJTiBEU0EgUFJJVkFURSBLRVktLS0t",  # DSA PRIVATE KEY
            "LS0tLS1CRUdJTiBQR1AgUFJJVkFURSBLRVkgQkxPQ0stLS0t",  # PGP PRIVATE KEY BLOCK
        ),
        body=_ALNUM + "+/=",
        min=20,
    ),
)
"""The token formats, in the order they are tried at one position (the longer prefix
of two first)."""

_SEPARATORS = ("", "_", "-", ".", " ")
_KEY_OWNERS = (
    "api", "access", "secret", "private", "priv", "account", "shared", "signing",
    "encryption", "decryption", "master", "client", "service", "auth", "ssh", "license",
    "subscription", "admin", "consumer", "hmac", "webhook", "app", "deploy", "integration",
    "session", "storage", "gpg", "pgp", "rsa",
)  # fmt: skip
_WORDS = (
    "password", "passwords", "passwd", "passphrase", "passphrases", "passcode", "passwort",
    "contrasena", "contraseña", "senha", "wachtwoord", "secret", "secrets", "token",
    "credential", "credentials", "authorization", "cookie", "cookies", "sessid",
)  # fmt: skip

KEY_WORDS: tuple[str, ...] = tuple(
    sorted(
        {
            *_WORDS,
            *(f"mot{a}de{b}passe" for a in _SEPARATORS for b in _SEPARATORS),
            *(f"{owner}{sep}{key}" for owner in _KEY_OWNERS for sep in _SEPARATORS
              for key in ("key", "keys")),
            *(f"session{sep}{part}" for sep in _SEPARATORS[:4] for part in ("id", "key", "token")),
        }
    )
)  # fmt: skip
"""Key names (lowercase) whose value is masked, matched at the end of a key in any
letter case, glued or not (``DB_PASSWORD``, ``clientSecret``, ``x-api-key``)."""

SHORT_KEY_WORDS: tuple[str, ...] = (
    "pwd", "pw", "pass", "passkey", "auth", "cred", "creds", "sig", "signature", "otp", "jwt",
    "bearer", "session", "pin",
)  # fmt: skip
"""Key names masked only at a word start (``db_pass``, ``userPwd``; not ``bypass``)."""

HEADER_KEY_WORDS: tuple[str, ...] = ("authorization", "cookie")
"""Key names (HTTP headers) whose value may hold a scheme and spaces: the value is masked
to the end of the line, its leading scheme word (``Bearer``, ``token``...) kept."""
