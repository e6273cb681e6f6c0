"""The viewer over real HTTP on 127.0.0.1: pages, status codes, headers, escaping of
hostile values, read-only methods, paging, filters, errors, damaged rows."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest

from ledger.errors import ValidationError
from ledger.sinks import open_reader
from ledger.viewer import Viewer, serve

from .conftest import fetch, sqlite_url
from .ledgers import HOSTILE_RUN, HOSTILE_TOOL, HUGE, PAGED_RUNS, Filled, fill

RUN_LINK = re.compile(r'<a href="/run\?id=([^"]*)" class="mono">')


def _runs_on(text: str) -> list[str]:
    from html import unescape
    from urllib.parse import unquote_plus

    return [unquote_plus(unescape(m)) for m in RUN_LINK.findall(text)]


def _pages(viewer: Viewer, filled: Filled) -> dict[str, tuple[str, dict[str, str]]]:
    return {
        "runs": ("/", {}),
        "run": ("/run", {"id": filled.demo_run}),
        "hostile run": ("/run", {"id": HOSTILE_RUN}),
        "why": ("/why", {"run": filled.demo_run, "call": filled.demo_write_call}),
        "hostile why": ("/why", {"run": HOSTILE_RUN, "call": "c-denied"}),
        "report": ("/report", {}),
        "report.html": ("/report.html", {}),
        "integrity": ("/integrity", {}),
        "event": ("/event", {"id": filled.huge_result_id}),
        "search": ("/", {"q": "<script>"}),
    }


def test_every_page_answers_200_with_strict_headers(viewer: Viewer, filled: Filled) -> None:
    for name, (path, params) in _pages(viewer, filled).items():
        answer = fetch(viewer, path, params)
        assert answer.status == 200, (name, answer.text[:500])
        assert answer.headers["Content-Type"] == "text/html; charset=utf-8", name
        csp = answer.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "style-src 'unsafe-inline'" in csp, name
        assert "script-src" not in csp, name
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Referrer-Policy"] == "no-referrer"
        assert answer.headers["X-Frame-Options"] == "DENY"


def test_pages_load_nothing_from_elsewhere_and_run_no_script(
    viewer: Viewer, filled: Filled
) -> None:
    for name, (path, params) in _pages(viewer, filled).items():
        text = fetch(viewer, path, params).text.lower()
        assert "<script" not in text, name
        assert "<img" not in text and "<iframe" not in text and "<link" not in text, name
        assert "onerror=" not in text.replace("onerror=alert", ""), name
        assert "http://" not in text.replace("http://x", "").replace(
            "http://www.w3.org/2000/svg", ""
        ), name
        assert "https://" not in text, name
        assert "@import" not in text and "url(" not in text, name


def test_hostile_values_are_escaped(viewer: Viewer) -> None:
    page = fetch(viewer, "/run", {"id": HOSTILE_RUN}).text
    assert '<script>alert("run")</script>' not in page
    assert "&lt;script&gt;alert(&quot;run&quot;)&lt;/script&gt;" in page
    assert HOSTILE_TOOL not in page
    assert "&lt;img src=x onerror=alert(&quot;tool&quot;)&gt;" in page
    assert "\u202e" not in page, "a bidi override reaches the page unmarked"
    assert "U+202E</span>" in page
    assert "&lt;/pre&gt;&lt;script&gt;" in page, "the hostile args are shown, escaped"
    assert "planner/&lt;b&gt;coder&lt;/b&gt;&quot;" in page
    runs = fetch(viewer, "/").text
    assert _runs_on(runs).count(HOSTILE_RUN) == 1, "the hostile run links to itself"


def test_a_huge_value_is_clipped_and_can_be_seen_whole(viewer: Viewer, filled: Filled) -> None:
    page = fetch(viewer, "/run", {"id": HOSTILE_RUN}).text
    assert len(page) < len(HUGE), "the page holds the huge value whole"
    assert "250,041 chars" in page or "chars · show" in page
    link = f"/value?event={filled.huge_result_id}&amp;field=result"
    assert link in page, "the clipped value links to all of it"
    whole = fetch(viewer, "/value", {"event": filled.huge_result_id, "field": "result"})
    assert whole.status == 200
    assert whole.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert "sandbox" in whole.headers["Content-Security-Policy"]
    assert json.loads(whole.text) == {"body": HUGE}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"])
def test_only_get_and_head_are_answered(viewer: Viewer, filled: Filled, method: str) -> None:
    path = Path(filled.url.removeprefix("sqlite:///"))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    answer = fetch(viewer, "/", method=method, body=b"kind=action",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert answer.status == 405
    assert answer.headers["Allow"] == "GET, HEAD"
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert "read-only" in answer.text
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_head_answers_headers_without_a_body(viewer: Viewer) -> None:
    answer = fetch(viewer, "/", method="HEAD")
    assert answer.status == 200 and answer.body == b""
    assert int(answer.headers["Content-Length"]) > 1000


def test_browsing_writes_nothing(tmp_path: Path) -> None:
    filled = fill(sqlite_url(tmp_path / "ro.db"), tmp_path / "work", paged=5)
    db = tmp_path / "ro.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with serve(filled.url) as v:
        for path, params in _pages(v, filled).values():
            assert fetch(v, path, params).status == 200
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_paging_visits_every_run_once(viewer: Viewer, filled: Filled) -> None:
    total = PAGED_RUNS + 2
    for order in ("newest", "oldest"):
        seen: list[str] = []
        params = {"order": order}
        while True:
            page = fetch(viewer, "/", params).text
            runs = _runs_on(page)
            assert len(runs) <= 50
            seen += runs
            nxt = re.search(r'id="next">', page)
            if not nxt:
                break
            offset = re.search(r'offset=(\d+)" id="next"', page)
            assert offset is not None
            params = {"order": order, "offset": offset.group(1)}
        assert len(seen) == total and len(set(seen)) == total, order
        if order == "oldest":
            assert seen[:3] == ["page-000", "page-001", "page-002"]
        else:
            assert seen[-1] == "page-000"
    first = fetch(viewer, "/").text
    assert "runs 1–50" in first  # "of 132" too where the total was counted
    assert len(_runs_on(fetch(viewer, "/", {"limit": "7"}).text)) == 7


def test_filters(viewer: Viewer, filled: Filled) -> None:
    def runs(**params: str) -> set[str]:
        answer = fetch(viewer, "/", {**params, "limit": "500"})
        assert answer.status == 200, answer.text[:300]
        return set(_runs_on(answer.text))

    paged = [f"page-{i:03d}" for i in range(PAGED_RUNS)]
    assert runs(tool="tool-1") == {r for i, r in enumerate(paged) if i % 3 == 1}
    assert runs(tool="run_shell") == {filled.demo_run}
    assert runs(tool=HOSTILE_TOOL) == {HOSTILE_RUN}
    denied = {r for i, r in enumerate(paged) if i % 10 == 0} | {filled.demo_run, HOSTILE_RUN}
    assert runs(verdict="denied") == denied
    assert runs(verdict="allowed", tool="tool-0") == {
        r for i, r in enumerate(paged) if i % 3 == 0 and i % 10
    }
    assert runs(agent="agent-3") == {r for i, r in enumerate(paged) if i % 5 == 3}
    assert runs(agent="CODER") == {HOSTILE_RUN}, "agent matches case-insensitively"
    assert runs(q="job number 42") == {"page-042"}
    assert runs(q="PermissionError") == {HOSTILE_RUN}, "search reaches errors"
    assert runs(principal="nobody-has-this") == set()
    # a window: the paged runs started one a minute from 2026-11-28T09:00Z
    assert runs(since="2026-11-28T09:10:00Z", until="2026-11-28T09:13:00Z") == {
        "page-010", "page-011", "page-012"
    }  # fmt: skip
    assert runs(since="2026-11-28T09:10:00Z", until="2026-11-28T09:20:00Z", tool="tool-2") == {
        "page-011", "page-014", "page-017"
    }  # fmt: skip
    assert runs(since="2026-11-29") == {filled.demo_run, HOSTILE_RUN}
    quick = fetch(viewer, "/", {"tool": "tool-1", "since": "2026-11-01"}).text
    assert '<a href="/?tool=tool-1&amp;since=24h" id="since-24h">' in quick, "keeps the filters"
    assert '<a href="/?tool=tool-1" id="since-all">' in quick


def test_principal_filter_reads_structured_identity(tmp_path: Path) -> None:
    import inspect

    from ledger.model import Event
    from ledger.sinks import open_sink

    accepts = inspect.signature(Event.__init__).parameters
    if "principal" in accepts:
        who = {"principal": "alice@example.com"}
    elif "actor" in accepts:
        from ledger.model.values import Actor  # type: ignore[attr-defined]

        who = {"actor": Actor(principal="alice@example.com")}  # type: ignore[dict-item]
    else:
        pytest.skip("this Event has no structured principal yet")
    url = sqlite_url(tmp_path / "who.db")
    with open_sink(url) as sink:
        sink.record(Event(kind="request", run_id="r-alice", args='"x"', **who))
        sink.record(Event(kind="request", run_id="r-bob", args='"y"'))
    with serve(url) as v:
        page = fetch(v, "/", {"principal": "ALICE"}).text
        assert set(_runs_on(page)) == {"r-alice"}
        assert "alice@example.com" in page


def test_errors_are_pages_with_the_right_status(viewer: Viewer, filled: Filled) -> None:
    cases = [
        ("/run", {"id": "no-such-run"}, 404, "no-such-run"),
        ("/run", {}, 404, "no run given"),
        ("/why", {"run": filled.demo_run, "call": "no-such-call"}, 404, "no-such-call"),
        ("/event", {"id": "01J0000000000000000000000A"}, 404, "no event"),
        ("/event", {"id": "not-an-id"}, 400, ""),
        ("/", {"since": "yesterday-ish"}, 400, "not a time"),
        ("/", {"since": "2026-12-01", "until": "2026-11-01"}, 400, "before until"),
        ("/", {"verdict": "maybe"}, 400, "verdict"),
        ("/", {"limit": "100000"}, 400, "limit"),
        ("/report", {"until": "nonsense"}, 400, "not a time"),
        ("/nowhere", {}, 404, "no page"),
        ("/value", {"event": filled.huge_result_id, "field": "event_json"}, 404, "field"),
    ]
    for path, params, status, words in cases:
        answer = fetch(viewer, path, params)
        assert answer.status == status, (path, params, answer.text[:400])
        assert 'id="error"' in answer.text
        assert words in answer.text, (path, params)
        assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_why_json_is_the_explanation(viewer: Viewer, filled: Filled) -> None:
    answer = fetch(viewer, "/why", {"run": filled.demo_run, "call": filled.demo_write_call,
                                    "format": "json"})  # fmt: skip
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
    with open_reader(filled.url) as reader:
        expected = reader.chain(filled.demo_run).why(filled.demo_write_call).to_dict()
    assert json.loads(answer.body) == expected


def test_report_page_matches_the_report(viewer: Viewer, filled: Filled) -> None:
    from ledger.report import build_report
    from ledger.viewer.params import when

    params = {"since": "2026-11-30", "until": "2026-12-31"}
    page = fetch(viewer, "/report", params).text
    with open_reader(filled.url) as reader:
        report = build_report(
            reader, since=when("2026-11-30", "since"), until=when("2026-12-31", "u")
        )
    assert f'id="total-denials"><b>{len(report.denials)}</b>' in page
    assert "Not compliant" in page  # the rogue delete_db ran without an intent
    assert 'id="timeline-chart"' in page
    as_json = json.loads(fetch(viewer, "/report", {**params, "format": "json"}).body)
    assert as_json["totals"] == report.to_dict()["totals"]
    csv_answer = fetch(viewer, "/report", {**params, "format": "csv"})
    assert csv_answer.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert csv_answer.text.splitlines()[0].startswith("section,")


def test_a_damaged_row_leaves_the_pages_readable(tmp_path: Path) -> None:
    filled = fill(sqlite_url(tmp_path / "bad.db"), tmp_path / "work", paged=3)
    with sqlite3.connect(tmp_path / "bad.db") as conn:
        (seq,) = conn.execute(
            "SELECT seq FROM events WHERE run_id = ? AND kind = 'tool_result' ORDER BY seq LIMIT 1",
            (filled.demo_run,),
        ).fetchone()
        conn.execute("UPDATE events SET event_json = '{\"kind\": broken' WHERE seq = ?", (seq,))
    with serve(filled.url) as v:
        run = fetch(v, "/run", {"id": filled.demo_run})
        assert run.status == 200, run.text[:500]
        assert 'id="corrupt"' in run.text and "do not read back" in run.text
        assert 'id="timeline"' in run.text and "run_shell" in run.text
        runs = fetch(v, "/", {"q": "text-nowhere"})  # the search reads every row of each run
        assert runs.status == 200 and 'id="corrupt"' in runs.text
        assert _runs_on(runs.text) == []
        assert filled.demo_run in _runs_on(fetch(v, "/", {"q": "tidy"}).text)
        report = fetch(v, "/report")
        assert report.status == 200 and "Not compliant" in report.text
        why = fetch(v, "/why", {"run": filled.demo_run, "call": filled.demo_write_call})
        assert why.status == 200
        integrity = fetch(v, "/integrity").text
        state = re.search(r'data-state="(\w+)"', integrity)
        assert state is not None and state.group(1) in {"failed", "none"}
        if state.group(1) == "failed":  # the tamper-evident log names the rewritten row
            assert 'id="integrity-findings"' in integrity and "changed" in integrity


def test_a_jsonl_ledger_is_shown_and_read_again_when_it_grows(tmp_path: Path) -> None:
    from ledger.model import Event

    filled = fill("jsonl:///" + str(tmp_path / "l.jsonl"), tmp_path / "work", paged=4)
    with serve(filled.url) as v:
        assert filled.demo_run in _runs_on(fetch(v, "/").text)
        assert fetch(v, "/run", {"id": HOSTILE_RUN}).status == 200
        integrity = fetch(v, "/integrity").text
        assert "no tamper-evident log" in integrity
        with (tmp_path / "l.jsonl").open("a", encoding="utf-8") as f:
            f.write(Event(kind="request", run_id="late-run", args='"late"').to_json() + "\n")
            f.write("{not json\n")
        page = fetch(v, "/").text
        assert "late-run" in _runs_on(page)
        assert 'id="file-notes"' in page, "the unreadable line is reported"


def test_integrity_of_a_sql_ledger(viewer: Viewer) -> None:
    page = fetch(viewer, "/integrity").text
    state = re.search(r'data-state="(\w+)"', page)
    assert state is not None
    try:
        from ledger.integrity.verify import verify_ledger  # noqa: F401
    except ImportError:
        assert state.group(1) == "none"
    else:
        assert state.group(1) in {"verified", "none"}, page[page.find('id="integrity-status"') :][
            :400
        ]


def test_a_foreign_host_header_is_refused(viewer: Viewer) -> None:
    answer = fetch(viewer, "/", headers={"Host": "attacker.example:80"})
    assert answer.status == 403 and "loopback" in answer.text
    assert fetch(viewer, "/", headers={"Host": f"localhost:{viewer.port}"}).status == 200


def test_only_loopback_addresses_unless_allowed(filled: Filled) -> None:
    with pytest.raises(ValidationError, match=r"not a loopback address.*--allow-remote"):
        serve(filled.url, host="0.0.0.0")
    with pytest.raises(ValidationError, match="port"):
        serve(filled.url, port=70000)
    with serve(filled.url, host="127.0.0.1", port=0) as v:
        assert v.url.startswith("http://127.0.0.1:") and v.port > 0


def test_a_missing_ledger_is_refused_before_serving(tmp_path: Path) -> None:
    from ledger.errors import StorageError

    with pytest.raises(StorageError, match="no ledger"):
        serve(sqlite_url(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()


def test_postgresql_ledger(pg_url: str, tmp_path: Path) -> None:
    filled = fill(pg_url, tmp_path / "work", paged=5)
    # a password in the URL (the test server trusts local connections and ignores it)
    head, _, rest = pg_url.partition("://")
    user, at, host = rest.partition("@")
    secret = "s3cr3t-pw"
    has_password = ":" in user or not at
    shown_url = pg_url if has_password else f"{head}://{user}:{secret}@{host}"
    with serve(shown_url) as v:
        page = fetch(v, "/").text
        assert {filled.demo_run, HOSTILE_RUN} <= set(_runs_on(page))
        if not has_password:
            assert secret not in page and f"{user}:***@" in page
            assert secret not in fetch(v, "/report").text
        assert fetch(v, "/run", {"id": filled.demo_run}).status == 200
        assert fetch(v, "/why", {"run": HOSTILE_RUN, "call": "c-denied"}).status == 200
        assert set(_runs_on(fetch(v, "/", {"tool": "tool-1", "limit": "500"}).text)) == {
            "page-001", "page-004"
        }  # fmt: skip
        assert fetch(v, "/report").status == 200
        assert fetch(v, "/integrity").status == 200


def test_concurrent_readers_while_an_agent_writes(tmp_path: Path) -> None:
    """Eight browsers at once while a writer keeps adding runs: every page answers 200,
    and the new runs appear."""
    import threading

    from ledger.model import Event
    from ledger.sinks import open_sink

    filled = fill(sqlite_url(tmp_path / "busy.db"), tmp_path / "work", paged=20)
    failures: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        with open_sink(filled.url) as sink:
            for i in range(60):
                sink.record(Event(kind="request", run_id=f"live-{i:03d}", args='"live"'))
        stop.set()

    def browser(n: int) -> None:
        pages = [("/", {}), ("/run", {"id": filled.demo_run}), ("/", {"q": "live"}),
                 ("/why", {"run": HOSTILE_RUN, "call": "c-failed"})]  # fmt: skip
        for i in range(12):
            path, params = pages[(n + i) % len(pages)]
            answer = fetch(v, path, params)
            if answer.status != 200:
                failures.append(f"{path} {params}: {answer.status} {answer.text[:200]}")

    with serve(filled.url) as v:
        threads = [threading.Thread(target=writer)] + [
            threading.Thread(target=browser, args=(n,)) for n in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert stop.is_set() and not failures, failures[:3]
        live = {r for r in _runs_on(fetch(v, "/", {"q": "live", "limit": "500"}).text)}
        assert live == {f"live-{i:03d}" for i in range(60)}


def test_events_outside_any_run_have_a_page(tmp_path: Path) -> None:
    from ledger.model import Event
    from ledger.sinks import open_sink

    url = sqlite_url(tmp_path / "norun.db")
    with open_sink(url) as sink:
        sink.record(Event(kind="tool_result", call_id="c9", tool="stray", result='"x"'))
        sink.record(Event(kind="request", run_id="r1", args='"y"'))
    with serve(url) as v:
        runs = fetch(v, "/").text
        assert "(outside any run)" in runs and '<a href="/run?id=" class="mono">' in runs
        page = fetch(v, "/run", {"id": ""})
        assert page.status == 200 and "stray" in page.text and "(outside any run)" in page.text


def test_approvals_and_principals_are_shown(tmp_path: Path) -> None:
    import inspect

    from ledger.model import Event
    from ledger.sinks import open_sink

    accepts = inspect.signature(Event.__init__).parameters
    if "approval" not in accepts or "actor" not in accepts:
        pytest.skip("this Event records no structured approval yet")
    from ledger.model.values import Actor, Approval  # type: ignore[attr-defined]

    actor = Actor(principal="alice@example.com", agent_id="triage-bot", agent_version="1.4")
    approval = Approval(approver="bob <ops>", time="2026-11-30T10:00:00Z",
                        reason="change ticket 4711")  # fmt: skip
    ref = [{"source": "memory", "id": "m1"}]
    events = [
        Event(kind="request", run_id="r-ok", args='"ship it"', actor=actor),
        Event(kind="gate_decision", run_id="r-ok", call_id="c1", tool="deploy", actor=actor,
              verdict="allowed", reason="approved", approval=approval),
        Event(kind="action", run_id="r-ok", call_id="c1", tool="deploy", args={}, refs=ref,
              verdict="allowed", reason="approved by bob", actor=actor, approval=approval),
        Event(kind="tool_result", run_id="r-ok", call_id="c1", tool="deploy", result='"ok"',
              actor=actor),
    ]  # fmt: skip
    url = sqlite_url(tmp_path / "who.db")
    with open_sink(url) as sink:
        for e in events:
            sink.record(e)
    with serve(url) as v:
        run = fetch(v, "/run", {"id": "r-ok"}).text
        assert "approved by <b>bob &lt;ops&gt;</b>" in run and "change ticket 4711" in run
        assert "alice@example.com" in run and "triage-bot" in run and "v1.4" in run
        why = fetch(v, "/why", {"run": "r-ok", "call": "c1"}).text
        assert "approved by <b>bob &lt;ops&gt;</b>" in why
        assert "2026-11-30 10:00:00" in why
        assert set(_runs_on(fetch(v, "/", {"principal": "alice"}).text)) == {"r-ok"}
        assert set(_runs_on(fetch(v, "/", {"agent": "triage"}).text)) == {"r-ok"}


def test_odd_request_targets_get_pages_not_tracebacks(viewer: Viewer) -> None:
    cases = {
        "/run?id=%ff%fe": 404,  # not UTF-8
        "/run?id=%00%1b[31m": 404,  # NUL and an escape sequence
        "/?q=%ff&tool=%00": 200,
        "/?limit=-1": 400,
        "/?offset=9999999999999999999999": 400,
        "/why?run=&call=": 404,
        "//run?id=x": 404,
        "/run/../integrity": 404,
    }
    for target, status in cases.items():
        answer = fetch(viewer, target)
        assert answer.status == status, (target, answer.text[:300])
        assert "Traceback" not in answer.text and "\x00" not in answer.text
        assert "\x1b" not in answer.text, target
    huge = fetch(viewer, "/?q=" + "a" * 70_000)
    assert huge.status in (400, 414)


def test_an_erased_field_shows_its_erasure(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from ledger.model import Event
    from ledger.retention import Retention, Selection
    from ledger.sinks import SQLiteSink

    old = datetime(2025, 1, 1, tzinfo=UTC)
    path = tmp_path / "erased.db"
    with SQLiteSink(path) as sink:
        sink.record(Event(kind="request", run_id="r-e", time=old, args='"x"'))
        result = Event(kind="tool_result", run_id="r-e", call_id="c", tool="read_mail",
                       time=old, result='{"body": "secret"}')  # fmt: skip
        sink.record(result)
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
        r.erase(Selection.of_events([result.event_id]), reason="GDPR <request> 42",
                by="dpo", fields=["result"])  # fmt: skip
    with serve(sqlite_url(path)) as v:
        page = fetch(v, "/run", {"id": "r-e"})
        assert page.status == 200, page.text[:300]
        assert "erased: GDPR &lt;request&gt; 42" in page.text
        assert "secret" not in page.text


def test_the_why_page_of_an_erased_call_shows_each_part_as_erased(tmp_path: Path) -> None:
    from ledger.retention import Retention, Selection
    from ledger.sinks import SQLiteSink
    from tests.retention.conftest import OLD, run_events

    path = tmp_path / "erased.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
        r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", by="dpo")
        call = sink.chain("old-1").actions[0].call_id
    with serve("sqlite:///" + str(path)) as v:
        page = fetch(v, "/why", {"run": "old-1", "call": call})
    assert page.status == 200
    assert page.text.count("[erased: GDPR Art. 17 request 42]") >= 5  # reason, args, result...
    assert "(none recorded)" not in page.text and "alice" not in page.text


def test_an_erased_events_page_and_values_show_each_erased_field(tmp_path: Path) -> None:
    """The event page lists the fields retention erased (the stored JSON no longer has
    them) as erased, and ``/value`` of such a field answers ``[erased: reason]``, not an
    empty body; a field the event never held stays off the page."""
    from ledger.retention import Retention, Selection
    from ledger.sinks import SQLiteSink
    from tests.retention.conftest import OLD, run_events

    path = tmp_path / "erased.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
        r.erase(Selection.of_run("old-1"), reason="GDPR <42>", by="dpo", fields=["args", "result"])
        action = next(e for e in sink.events(run_id="old-1", kind="action"))
        result = next(e for e in sink.events(run_id="old-1", kind="tool_result"))
    with serve("sqlite:///" + str(path)) as v:
        page = fetch(v, "/event", {"id": str(action.event_id)})
        assert page.status == 200
        assert re.search(r"<dt>args</dt><dd>[^<]*<[^>]*>erased: GDPR &lt;42&gt;", page.text)
        assert "<dt>result</dt>" not in page.text  # an action held no result
        page = fetch(v, "/event", {"id": str(result.event_id)})
        assert re.search(r"<dt>result</dt><dd>[^<]*<[^>]*>erased: GDPR &lt;42&gt;", page.text)
        for event, field in ((action, "args"), (result, "result")):
            whole = fetch(v, "/value", {"event": str(event.event_id), "field": field})
            assert (whole.status, whole.text) == (200, "[erased: GDPR <42>]")
        whole = fetch(v, "/value", {"event": str(action.event_id), "field": "reason"})
        assert whole.text and "erased" not in whole.text  # what was kept reads as it was
