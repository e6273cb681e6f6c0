"""A writer process for the fault tests: commits actions and reports each one acknowledged.

    python _writer.py DB_PATH RUN_ID COUNT THREADS

Prints ``ack <event_id>`` (flushed) as each ``commit_action`` returns; COUNT 0 means
forever. Exits 0 when done, 1 with the error on stderr if any commit fails.
"""

from __future__ import annotations

import sys
import threading

from ledger.model import Event, Kind, Ref, RefSource, Verdict
from ledger.sinks import SQLiteSink


def main() -> int:
    path, run_id, count, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    out = threading.Lock()
    failures: list[BaseException] = []
    sink = SQLiteSink(path)

    def work(k: int) -> None:
        i = 0
        while count == 0 or i < count:
            ev = Event(
                kind=Kind.ACTION,
                run_id=run_id,
                call_id=f"t{k}-{i}",
                tool="write_file",
                args=f'{{"path":"/tmp/{k}/{i}","data":"{"x" * 200}"}}',
                verdict=Verdict.ALLOWED,
                refs=(Ref(source=RefSource.TOOL, id=f"req-{k}-{i}"),),
            )
            try:
                sink.commit_action(ev)
            except BaseException as exc:
                failures.append(exc)
                print(f"error {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                return
            with out:
                sys.stdout.write(f"ack {ev.event_id}\n")
                sys.stdout.flush()
            i += 1

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    sink.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
