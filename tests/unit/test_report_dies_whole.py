"""SIGTERM to ``report`` on a large recording leaves no process of its own behind (issue 43, item 4).

``report`` reads a big recording in spans on forked worker processes. A SIGTERM (a CI timeout, a
process manager: they signal only the parent) ended the parent and orphaned its two workers,
still blocked 27 s later. Now each worker dies with its parent (the kernel's parent-death signal)
and the parent kills them first. Tested on the real command, on a recording made by the real
recorder, by walking the process tree in /proc.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specmon.output import recording_replay
from specmon.output.recording import Recorder

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods() or not Path("/proc/self/stat").exists(),
                                reason="forked workers, /proc")

ROOT = Path(__file__).resolve().parents[2]


def _stat(pid: str) -> tuple[str, int, int] | None:
    """(state, parent, session) of a process from /proc, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[3])


def _tree(root: int) -> list[int]:
    """Every live process of ``root``'s session (its own: orphans keep their session when
    re-parented) or below it, the root included; zombies are not alive."""
    found = []
    stats = {pid: _stat(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    parents = {int(pid): st[1] for pid, st in stats.items() if st is not None}
    for pid, st in stats.items():
        if st is None or st[0] == "Z":
            continue
        p, chain = int(pid), 0
        while p not in (0, 1, root) and chain < 64:
            p, chain = parents.get(p, 0), chain + 1
        if st[2] == root or p == root or int(pid) == root:
            found.append(int(pid))
    return found


@pytest.fixture(scope="module")
def big_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording well past the size read in parallel, made by the recorder as ``--record`` makes it."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    log = ROOT / "sample_logs" / "sim_eagle3_2step.log"
    lines = log.read_text().splitlines()
    serving = [line for line in lines if "Decode batch" in line]
    with Recorder(path, meta={"command": "watch"}) as rec:
        rec.source(str(log), year=2026)
        n = 1
        rec.batch(str(log), n, lines)
        n += len(lines)
        while path.stat().st_size < 3 * recording_replay.PIPELINE_MIN_BYTES // 2:
            for _ in range(50):
                rec.batch(str(log), n, serving)
                n += len(serving)
            rec.flush()
    assert path.stat().st_size >= recording_replay.PIPELINE_MIN_BYTES
    return path


def test_sigterm_to_report_mid_read_leaves_no_process_behind(big_recording: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "specmon", "report", str(big_recording), "--format", "json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_tree(proc.pid)) < 2:  # its workers forked: it is reading in spans
            assert proc.poll() is None, f"report ended before its workers were seen: {proc.stderr.read()!r}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "report never forked its workers"
            time.sleep(0.02)
        # Frozen mid-read: on a fast machine the workers finished their spans within 0.2 s of being
        # seen (CI, 2026-12-06), so a sleep here raced the read. Stopped, the session cannot end its
        # read; the SIGTERM waits, pending, and is delivered the moment the session runs again.
        os.killpg(proc.pid, signal.SIGSTOP)
        workers = [pid for pid in _tree(proc.pid) if pid != proc.pid]
        assert workers, "its workers ended before the read could be frozen"
        os.kill(proc.pid, signal.SIGTERM)  # the parent only, as a process manager does
        os.killpg(proc.pid, signal.SIGCONT)
        sent = time.monotonic()
        left = _tree(proc.pid)
        while left and time.monotonic() - sent < 1.0:
            proc.poll()  # (reaps the parent: a zombie is not alive, but keep /proc tidy)
            time.sleep(0.02)
            left = _tree(proc.pid)
        assert left == [], f"alive {time.monotonic() - sent:.2f} s after SIGTERM: {left} (workers were {workers})"
        assert proc.wait(5) in (-signal.SIGTERM, 128 + signal.SIGTERM)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGCONT)  # (a failure while frozen)
            proc.kill()
            proc.wait()
        for pid in _tree(proc.pid):  # (only on failure: what this test started)
            os.kill(pid, signal.SIGKILL)
        assert proc.stderr is not None
        proc.stderr.close()


def test_a_worker_whose_parent_is_gone_ends_itself() -> None:
    """The race the parent-death signal leaves: a parent gone before the worker set it up."""
    from specmon.ingest import feeding

    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            feeding._die_with_parent(os.getppid() + 1)  # not its parent: as if re-parented already
        finally:
            os._exit(0)  # (only reached if it did not end itself)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 1
