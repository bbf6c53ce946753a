"""Write failures are loud (issue 34, item 6).

Recording to a full disk stopped mid-line with no word in the header, the event log or the exit
status, and ``report`` later blamed a killed recorder; an export to a full disk left a 0-byte CSV.
The failures here are real ones from the kernel: ``RLIMIT_FSIZE`` in a child process (``EFBIG``
at the limit, whatever the file system, for any user), and ``/dev/full`` (``ENOSPC`` on every
write), not a mocked writer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.output.recording import Recorder
from specmon.output.report import load_report, to_markdown, write_failure
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import StaticSource, isolated_home, source_app, wait_for
from tests.support.ptyproc import PtyProcess

__all__ = ["isolated_home"]

PROJECT = Path(__file__).resolve().parents[2]


def run_limited(code: str, limit: int) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child whose files may not grow past ``limit`` bytes (soft limit: it can lift it)."""
    prelude = textwrap.dedent(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, hard))
        def lift():
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    """)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, cwd=PROJECT)


@settings(max_examples=6, deadline=None)
@given(limit=st.integers(300, 6000), lines=st.integers(50, 400))
def test_a_recording_that_hits_the_limit_says_so_and_marks_the_file(tmp_path_factory: object, limit: int,
                                                                    lines: int) -> None:
    folder = tmp_path_factory.mktemp("rec")  # type: ignore[attr-defined]
    path = folder / "session.jsonl"
    run = run_limited(f"""
        import json
        from specmon.output.recording import Recorder
        r = Recorder({str(path)!r}, flush_interval=1.0)
        r.source("gpu:/log")
        for i in range({lines}):
            r.line("gpu:/log", i + 1, "[2026-02-12 10:00:00 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 90.0")
        r.flush()
        first = r.error
        lost = r.lost
        lift()  # the disk has room again: the failure is marked, the session goes on
        r.line("gpu:/log", {lines} + 1, "after")
        r.close()
        print(json.dumps({{"error": first, "lost": lost, "final": r.error}}))
    """, limit)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    size = len(path.read_bytes())
    if out["error"] is None:
        assert out["lost"] == 0  # it all fitted
        return
    assert "File too large" in out["error"] and str(path) in out["error"] and out["lost"] > 0
    text = path.read_text()
    marks = [json.loads(line) for line in text.splitlines() if '"write-failed"' in line and line.startswith("{")]
    assert len(marks) == 1 and marks[0]["lost"] == out["lost"] and marks[0]["error"] == out["error"]
    assert text.endswith("\n") and size > limit
    data = load_report(path)
    sentence = write_failure(data)
    assert sentence is not None and "File too large" in sentence and f"{out['lost']:,} entries" in sentence
    assert data.read.bad_lines <= 1  # at most the line the limit cut in two
    assert "recorder was killed" not in to_markdown(data) and "writing the recording failed" in to_markdown(data)


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(0, 20000), min_size=1, max_size=3), limit=st.integers(1, 12000))
def test_an_export_is_written_whole_or_not_at_all(tmp_path_factory: object, sizes: list[int], limit: int) -> None:
    folder = tmp_path_factory.mktemp("exp")  # type: ignore[attr-defined]
    files = {str(folder / f"out{i}.csv"): "x" * n for i, n in enumerate(sizes)}
    run = run_limited(f"""
        from pathlib import Path
        from specmon.output.files import write_files_atomically
        try:
            write_files_atomically({{Path(p): t for p, t in {files!r}.items()}})
        except OSError as exc:
            print("failed", exc.errno)
        else:
            print("written")
    """, limit)
    assert run.returncode == 0, run.stderr
    left = sorted(p.name for p in folder.iterdir())
    if max(sizes) > limit:
        assert run.stdout.split()[0] == "failed" and left == []  # nothing partial, no temporary file
    else:
        assert run.stdout.strip() == "written"
        assert left == sorted(Path(p).name for p in files)
        assert all(Path(p).read_text() == t for p, t in files.items())


async def test_the_dashboard_says_a_failed_recording_and_export_loudly(isolated_home: Path, tmp_path: Path) -> None:
    """``/dev/full``: every write fails with ENOSPC, as on a full disk."""
    recorder = Recorder("/dev/full", flush_interval=0.05)
    source = StaticSource([["[2026-02-12 10:00:00] a line"]])
    app = source_app(source, export_dir=Path("/dev/full/exports"))
    app.recorder = recorder
    app.feeder.recorder = recorder
    try:
        async with app.run_test(size=(140, 30), notifications=True) as pilot:
            await wait_for(pilot, lambda: recorder.error is not None, "the failed write")
            await wait_for(pilot, lambda: app.write_failures, "the app to notice")
            app._tick()
            header = app.query_one(StatusHeader).render().plain
            assert "No space left on device" in header and "recording" in header
            assert any(e.level == "error" and "No space left" in e.text for e in app.feeder.session.events)
            assert app.write_failed
    finally:
        recorder.close()


def test_watch_exits_non_zero_and_says_why_when_its_recording_fails(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-02-12 10:00:00] starting\n")
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    p = PtyProcess(["watch", str(log), "--record", "/dev/full"], env)
    try:
        p.wait_until(lambda: "No space left" in p.output, "the header to say the recording failed", 60)
        os.write(p.master or -1, b"q")
        assert p.wait_exit(60) == 4
        assert "recording to /dev/full failed: No space left on device" in p.final_output()
    finally:
        p.kill()
