"""Realistic fake secrets in the formats real scanners (gitleaks, detect-secrets) and the
providers document, generated fresh for each test run, and the places an agent puts them.

Each :class:`Secret` is the text as it would appear (``shown``, with its usual context
such as ``aws_secret_access_key = ``) and the secret part itself (``value``), which must
never reach the store. Written from the providers' published formats, not from the
redactor's tables, so that a format the redactor lacks fails here.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Secret:
    name: str
    value: str  # must not be stored
    shown: str  # how it appears in text (the value with its usual context)


def _r(rnd: random.Random, alphabet: str, n: int) -> str:
    return "".join(rnd.choice(alphabet) for _ in range(n))


def _mixed(rnd: random.Random, n: int) -> str:
    """A random key body with digits and both letter cases, as generated keys have."""
    while True:
        body = _r(rnd, ALNUM, n)
        if any(c.isdigit() for c in body) and body != body.lower() and body != body.upper():
            return body


def _pem(rnd: random.Random, kind: str) -> str:
    lines = [_r(rnd, ALNUM + "+/", 64) for _ in range(6)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"


def _jwt(rnd: random.Random) -> str:
    def seg(obj: str) -> str:
        return base64.urlsafe_b64encode(obj.encode()).decode().rstrip("=")

    header = seg('{"alg":"HS256","typ":"JWT"}')
    payload = seg('{"sub":"' + _r(rnd, string.digits, 10) + '"}')
    return f"{header}.{payload}.{_r(rnd, B64URL, 43)}"


def corpus(seed: int) -> list[Secret]:
    """One fake secret of every format, fresh for ``seed``."""
    rnd = random.Random(seed)
    out: list[Secret] = []

    def add(name: str, value: str, shown: str | None = None) -> None:
        out.append(Secret(name, value, shown if shown is not None else value))

    aws_secret = _r(rnd, ALNUM + "+/", 40)
    add("aws-access-key-id", "AKIA" + _r(rnd, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
    add("aws-sts-key-id", "ASIA" + _r(rnd, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
    add("aws-secret-access-key", aws_secret, f"aws_secret_access_key = {aws_secret}")
    session = _r(rnd, ALNUM + "+/", 300)
    add("aws-session-token", session, f"AWS_SESSION_TOKEN={session}")
    add("gcp-api-key", "AIza" + _r(rnd, B64URL, 35))
    add("gcp-oauth-client-secret", "GOCSPX-" + _r(rnd, B64URL, 28))
    add("gcp-oauth-access-token", "ya29." + _r(rnd, B64URL, 120))
    sa_key = _pem(rnd, "PRIVATE KEY")
    add(
        "gcp-service-account",
        sa_key.splitlines()[3],
        '{"type": "service_account", "private_key_id": "'
        + _r(rnd, HEX, 40)
        + '", "private_key": "'
        + sa_key.replace("\n", "\\n")
        + '"}',
    )
    acct_key = base64.b64encode(rnd.randbytes(64)).decode()
    add(
        "azure-storage-connection-string",
        acct_key,
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={acct_key};"
        "EndpointSuffix=core.windows.net",
    )
    add(
        "azure-ad-client-secret",
        _r(rnd, ALNUM, 3) + str(rnd.randrange(10)) + "Q~" + _r(rnd, ALNUM + "_~.-", 34),
    )
    sig = _r(rnd, ALNUM, 43) + "%3D"
    add(
        "azure-sas-url",
        sig,
        f"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&sig={sig}",
    )
    add("github-pat", "ghp_" + _mixed(rnd, 36))
    add("github-oauth", "gho_" + _mixed(rnd, 36))
    add("github-app", "ghs_" + _mixed(rnd, 36))
    add("github-fine-grained", "github_pat_" + _mixed(rnd, 22) + "_" + _mixed(rnd, 59))
    add("gitlab-pat", "glpat-" + _r(rnd, B64URL, 20))
    add("gitlab-runner", "glrt-" + _r(rnd, B64URL, 20))
    add(
        "slack-bot-token",
        f"xoxb-{_r(rnd, string.digits, 12)}-{_r(rnd, string.digits, 12)}-{_mixed(rnd, 24)}",
    )
    add(
        "slack-webhook",
        f"hooks.slack.com/services/T{_r(rnd, string.ascii_uppercase + string.digits, 8)}"
        f"/B{_r(rnd, string.ascii_uppercase + string.digits, 10)}/{_mixed(rnd, 24)}",
    )
    add("stripe-live-secret", "sk_live_" + _mixed(rnd, 99))
    add("stripe-restricted", "rk_live_" + _mixed(rnd, 24))
    add("stripe-webhook-secret", "whsec_" + _mixed(rnd, 32))
    add("openai-project-key", "sk-proj-" + _r(rnd, B64URL, 156))
    add("openai-legacy-key", "sk-" + _mixed(rnd, 20) + "T3BlbkFJ" + _mixed(rnd, 20))
    add("anthropic-key", "sk-ant-api03-" + _r(rnd, B64URL, 93) + "AA")
    add("jwt", _jwt(rnd))
    add(
        "rsa-private-key",
        _pem(rnd, "RSA PRIVATE KEY").splitlines()[2],
        _pem(rnd, "RSA PRIVATE KEY"),
    )
    key = _pem(rnd, "OPENSSH PRIVATE KEY")
    add("openssh-private-key", key.splitlines()[2], key)
    key = _pem(rnd, "EC PRIVATE KEY")
    add("ec-private-key", key.splitlines()[4], key)
    key = _pem(rnd, "PGP PRIVATE KEY BLOCK")
    add("pgp-private-key", key.splitlines()[3], key)
    pw = _r(rnd, ALNUM, 8) + "@" + _r(rnd, ALNUM, 6)
    add("postgres-url", pw, f"postgresql://app:{pw}@db.internal:5432/prod")
    pw = _r(rnd, ALNUM, 14)
    add("mysql-url", pw, f"mysql://root:{pw}@127.0.0.1:3306/shop")
    pw = _r(rnd, ALNUM, 14)
    add("mongodb-srv", pw, f"mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/test")
    pw = _r(rnd, ALNUM, 20)
    add("redis-url", pw, f"redis://:{pw}@cache:6379/0")
    pw = _r(rnd, ALNUM, 12)
    add("jdbc", pw, f"jdbc:mysql://db:3306/app?user=app&password={pw}&useSSL=true")
    pw = _r(rnd, ALNUM, 12)
    add(
        "ado-connection-string",
        pw,
        f"Server=tcp:srv.database.windows.net,1433;Database=db;User ID=app;Password={pw};",
    )
    add("twilio-api-key", "SK" + _r(rnd, HEX, 32))
    add("sendgrid-key", "SG." + _r(rnd, B64URL, 22) + "." + _r(rnd, B64URL, 43))
    add("mailgun-key", "key-" + _r(rnd, HEX, 32))
    add("npm-token", "npm_" + _mixed(rnd, 36))
    add("pypi-token", "pypi-AgEIcHlwaS5vcmc" + _r(rnd, B64URL, 70))
    add("huggingface-token", "hf_" + _r(rnd, string.ascii_letters, 34))
    add("digitalocean-token", "dop_v1_" + _r(rnd, HEX, 64))
    add("shopify-token", "shpat_" + _r(rnd, HEX, 32))
    add("databricks-token", "dapi" + _r(rnd, HEX, 32))
    add("vault-token", "hvs." + _r(rnd, B64URL, 90))
    add("atlassian-token", "ATATT3" + _r(rnd, B64URL, 180))
    add("linear-key", "lin_api_" + _mixed(rnd, 40))
    add("postman-key", "PMAK-" + _r(rnd, HEX, 24) + "-" + _r(rnd, HEX, 34))
    add("grafana-cloud", "glc_" + _r(rnd, ALNUM + "+/", 60))
    add("newrelic-key", "NRAK-" + _r(rnd, string.ascii_uppercase + string.digits, 27))
    add("age-secret-key", "AGE-SECRET-KEY-1" + _r(rnd, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58))
    b64 = base64.b64encode((_pem(rnd, "RSA PRIVATE KEY") + "\n").encode()).decode()
    add("kubeconfig-client-key-data", b64[-60:], f"client-key-data: {b64}")
    basic = base64.b64encode(f"admin:{_r(rnd, ALNUM, 12)}".encode()).decode()
    add("basic-auth-header", basic, f"Authorization: Basic {basic}")
    tok = _r(rnd, HEX, 40)
    add("github-token-header", tok, f"Authorization: token {tok}")
    return out


# --- placements: where an agent puts a secret ---------------------------------------

Placement = Callable[[str], dict[str, object]]
"""A placement turns a secret into the keyword ``args`` of a tool call."""

PLACEMENTS: dict[str, Placement] = {
    "text": lambda s: {"note": f"use {s} now"},
    "dict-key": lambda s: {"tokens": {s: "admin"}},
    "list-item": lambda s: {"items": ["a", s]},
    "pwd-key": lambda s: {"pwd": s},
    "auth-key": lambda s: {"auth": s},
    "pass-key": lambda s: {"db_pass": s},
    "camel-key": lambda s: {"dbPassword": s},
    "upper-key": lambda s: {"API_TOKEN": s},
    "header-key": lambda s: {"headers": {"Authorization": f"token {s}"}},
    "cookie-key": lambda s: {"Cookie": f"session={s}"},
    "authorization-token-text": lambda s: {
        "raw": f"GET / HTTP/1.1\r\nAuthorization: token {s}\r\n"
    },
    "authorization-bearer-text": lambda s: {"raw": f"Authorization: Bearer {s}"},
    "cookie-text": lambda s: {"raw": f"Cookie: theme=dark; sessionid={s}; x=1"},
    "url-password-with-at": lambda s: {"dsn": f"postgresql://u:p@{s}@db/x"},
    "url-password": lambda s: {"dsn": f"https://user:{s}@host/path"},
    "glued": lambda s: {"note": f"mykey{s}"},
    "xml-element": lambda s: {"xml": f"<config><password>{s}</password></config>"},
    "xml-cdata": lambda s: {"xml": f"<secret><![CDATA[{s}]]></secret>"},
    "xml-attribute": lambda s: {"xml": f'<db user="u" password="{s}"/>'},
    "xml-name-value": lambda s: {"xml": f'<add key="ApiToken" value="{s}" />'},
    "json-in-string": lambda s: {"body": '{"user": "u", "password": "' + s + '"}'},
    "escaped-json-in-string": lambda s: {"body": '{\\"client_secret\\": \\"' + s + '\\"}'},
    "env-file": lambda s: {"env": f"HOST=x\nexport DB_PASSWORD={s}\nPORT=1"},
    "yaml": lambda s: {"yaml": f"db:\n  host: x\n  password: {s}\n"},
    "yaml-block": lambda s: {"yaml": f"private_key: |\n  {s}\n  {s[::-1]}\nother: 1\n"},
    "query-string": lambda s: {"url": f"https://api.example.com/v1?access_token={s}&q=1"},
    "cli-flag": lambda s: {"argv": ["deploy", "--api-key", s, "--force"]},
    "cli-flag-text": lambda s: {"cmd": f"mysqldump --password {s} shop"},
    "curl-user": lambda s: {"cmd": f"curl -u admin:{s} https://x"},
    "name-value": lambda s: {"env": [{"name": "DB_PASSWORD", "value": s}]},
    "ini": lambda s: {"ini": f"[db]\nsecret = {s}\n"},
}
"""Where an agent puts a secret; each holds the secret under a telling name or in a
telling shape, so the default redactor must mask it whatever the secret looks like."""
