"""The remote tail's protocol under generated event sequences: every line once, or reported lost.

The real client (:class:`SSHTailSource`, unchanged: its reconnect loop, frame handling and
resume arguments) and the real helper (``remote_tail.sh``, run by ``sh -c`` as on a host),
with the SSH transport replaced by a local pipe so one sequence takes a fraction of a
second. A drop kills the helper's process group; it can be aimed at the moment right after
a given frame (an ``R``: a rotated file finished, the next one not yet named), which random
timing over a real connection hits only now and then. hypothesis generates the sequences
of appends, rotations, truncations and drops, and what the host does while disconnected.

The same property as the stress test over the real sshd (``tests/ssh/test_tail_stress.py``):
delivered lines are strictly increasing (nothing doubled, nothing reordered), and every
line written is delivered unless it was destroyed on the host while disconnected, in which
case exactly one :class:`Loss` was reported at the offset the reader had reached.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specmon.sources.ssh as sshmod
from specmon.sources.base import ConnectionState
from specmon.sources.ssh import FrameReader, SSHTailSource
from specmon.ssh.connect import SSHTarget
from tests.support.hostlog import HostLog, seq_of


class LocalChannel:
    """The follow channel: the helper as a local process; ``close`` kills its group."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class LocalConn:
    """What :class:`SSHTailSource` uses of a connection, running commands with ``sh -c`` here."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.channels: list[LocalChannel] = []

    async def run(self, command: str, **_kw: Any) -> Any:
        proc = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        out, err = await proc.communicate()
        return SimpleNamespace(exit_status=proc.returncode, stdout=out, stderr=err)

    async def create_session(self, factory: Callable[[], Any], command: str, **_kw: Any) -> tuple[Any, Any]:
        proc = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        chan = LocalChannel(proc)
        self.channels.append(chan)
        session = factory()
        session.connection_made(chan)
        self.host.pumps.append(asyncio.ensure_future(self.host.pump(proc, chan, session)))
        return chan, session

    def close(self) -> None:
        for chan in self.channels:
            chan.close()


class Host:
    """The transport: delivers the helper's output, and drops the 'connection' when told."""

    def __init__(self) -> None:
        self.pumps: list[asyncio.Future[None]] = []
        self.drop_after: str | None = None  # drop right after the next frame of this kind
        self.current: LocalChannel | None = None
        self.frames: list[str] = []

    def drop(self) -> None:
        if self.current is not None:
            self.current.close()

    async def pump(self, proc: asyncio.subprocess.Process, chan: LocalChannel, session: Any) -> None:
        self.current = chan
        shadow = FrameReader()  # finds frame boundaries, to cut the stream right after one
        assert proc.stdout is not None
        dropped = False
        while data := await proc.stdout.read(65536):
            if dropped:
                continue
            if self.drop_after is None:
                self.frames += [f.kind for f in shadow.feed(data)]
                session.data_received(data, None)
                continue
            for i in range(len(data)):
                kinds = [f.kind for f in shadow.feed(data[i : i + 1])]
                self.frames += kinds
                if self.drop_after in kinds:
                    session.data_received(data[: i + 1], None)
                    self.drop_after = None
                    chan.close()
                    dropped = True
                    break
            else:
                session.data_received(data, None)
        status = await proc.wait()
        session.exit_status_received(status)
        session.connection_lost(None)


class Link:
    def __init__(self, conn: LocalConn) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()


class Gate:
    """The reconnect sleep: immediate unless the test holds the source disconnected."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()

    async def sleep(self, _seconds: float) -> None:
        await self.open.wait()
        await asyncio.sleep(0)


async def until(predicate: Callable[[], bool], what: str, source: SSHTailSource, host: Host) -> None:
    for _ in range(1000):  # 5 s: a hang becomes a failure
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}; {source.status!r}; frames {[f for f in host.frames if f != 'H'][-60:]}")


WRITE = st.tuples(st.just("write"), st.integers(1, 40))
LIVE = st.sampled_from(["rotate", "truncate"]).map(lambda a: (a, 0))
DROP = st.tuples(
    st.sampled_from(["drop", "drop-after-R", "drop-after-O", "drop-after-A", "drop-after-D", "drop-after-T"]),
    st.integers(0, 5),  # what the host does meanwhile (index into AFTERWARDS)
)
AFTERWARDS = ["nothing", "rotate", "rotate twice", "truncate", "recreate", "recreate then rotate"]


async def run(events: list[tuple[str, int]], tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for old in tmp_path.glob("server.log*"):
        old.unlink()
    log = HostLog(tmp_path / "server.log", rng)
    host = Host()
    gate = Gate()

    async def local_connect(_target: SSHTarget) -> Link:
        return Link(LocalConn(host))

    source = SSHTailSource(SSHTarget("127.0.0.1"), str(log.path), lines=0, sleep=gate.sleep,
                           poll_interval=0.02, probe_interval=3600)
    delivered: list[str] = []
    lost: set[int] = set()
    expected_losses: list[int] = []

    async def collect() -> None:
        async for batch in source.batches():
            delivered.extend(batch)

    def seen() -> set[int]:
        return {seq_of(line) for line in delivered}

    def caught_up() -> bool:
        return len(delivered) + len(lost) >= log.seq

    def reached_in(file_id: int) -> int | None:
        have = seen()
        ends = [end for seq, end in log.files[file_id] if seq in have]
        return ends[-1] if ends else None

    def destroy(how: Callable[[], None]) -> None:
        offset = reached_in(log.file_id)
        if offset is None:
            # Nothing of it read yet: destroying it would lose lines no reader can know of
            # (a file truncated back to the offset 0 it was left at looks untouched). Not this.
            return
        have = seen()
        lost.update(seq for seq, _ in log.files[log.file_id] if seq not in have)
        expected_losses.append(offset)
        how()

    original = sshmod.connect
    sshmod.connect = local_connect  # type: ignore[assignment]
    task = asyncio.create_task(collect())
    try:
        await until(lambda: source.status.state is ConnectionState.LIVE and bool(host.frames), "live", source, host)
        await log.write(rng.randint(1, 20))
        for kind, arg in events:
            if kind == "write":
                await log.write(arg)
            elif kind == "rotate":
                log.rotate()
                await log.write(rng.randint(0, 10))
            elif kind == "truncate":
                await until(caught_up, "the reader to catch up before a truncation", source, host)
                noticed = sum("was truncated" in e for e in source.status.events)
                log.truncate()
                await until(lambda n=noticed: sum("was truncated" in e for e in source.status.events) > n,
                            "the truncation noticed", source, host)
                await log.write(rng.randint(1, 10))
            else:
                gate.open.clear()
                if kind == "drop":
                    writer = asyncio.create_task(log.write(rng.randint(5, 40)))
                    await asyncio.sleep(rng.random() * 0.05)
                    host.drop()
                    await writer
                else:
                    target = kind[-1]
                    host.drop_after = target
                    # Make the frame happen: a rotation gives R then O/A, a truncation T.
                    if target in "ROA":
                        log.rotate()
                        await log.write(rng.randint(1, 10))
                    elif target == "T":
                        await until(caught_up, "the reader to catch up before a truncation", source, host)
                        log.truncate()
                        await log.write(rng.randint(1, 10))
                    elif target == "D":
                        await log.write(rng.randint(1, 10))
                    await until(lambda: host.drop_after is None, f"a {target} frame", source, host)
                await until(lambda: source.status.state is ConnectionState.RECONNECTING, "the drop", source, host)
                await log.write(rng.randint(0, 20))
                what = AFTERWARDS[arg]
                if what in ("rotate", "rotate twice"):
                    log.rotate()
                    await log.write(rng.randint(0, 10))
                    if what == "rotate twice":
                        log.rotate()
                        await log.write(rng.randint(0, 10))
                elif what == "truncate":
                    destroy(log.truncate)
                elif what.startswith("recreate"):
                    destroy(log.recreate)
                    if what.endswith("rotate"):
                        await log.write(rng.randint(1, 10))
                        log.rotate()
                gate.open.set()
                await log.write(rng.randint(1, 10))
        host.drop_after = None
        await log.write(5)
        await until(lambda: len(delivered) + len(lost) >= log.seq, f"all {log.seq} lines", source, host)
        await asyncio.sleep(0.1)  # a doubled line would arrive as an extra one
    finally:
        gate.open.set()
        await source.close()
        await asyncio.wait_for(task, 20)
        sshmod.connect = original  # type: ignore[assignment]
        host.drop()
        await asyncio.gather(*host.pumps, return_exceptions=True)

    seqs = [seq_of(line) for line in delivered]
    assert seqs == sorted(set(seqs)), f"a line was delivered twice or out of order: {seqs}"
    assert set(seqs).isdisjoint(lost)
    missing = sorted(set(range(log.seq)) - set(seqs) - lost)
    assert not missing, f"lines missing without a report: {missing[:10]} ({len(missing)})"
    assert [loss.offset for loss in source.losses] == expected_losses
    assert source.status.lost == len(expected_losses)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(events=st.lists(st.one_of(WRITE, LIVE, DROP), min_size=3, max_size=10), seed=st.integers(0, 2**16))
async def test_generated_sequences(events: list[tuple[str, int]], seed: int, tmp_path: Path) -> None:
    await run(events, tmp_path, seed)


@pytest.mark.parametrize("afterwards", range(len(AFTERWARDS)))
@pytest.mark.parametrize("frame", ["R", "O", "A", "D", "T"])
async def test_drop_right_after_each_frame(frame: str, afterwards: int, tmp_path: Path) -> None:
    """Each frame boundary, each thing the host does meanwhile (the R one lost a whole rotated file)."""
    await run([("write", 5), (f"drop-after-{frame}", afterwards), ("write", 5)], tmp_path, 1)


async def test_chain_after_a_lost_file(tmp_path: Path) -> None:
    """The file being read is deleted while disconnected and the new one rotated: the rotated one is read first."""
    await run([("write", 10), ("drop", 5), ("write", 3), ("drop", 5), ("write", 3)], tmp_path, 3)
