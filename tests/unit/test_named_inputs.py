"""What the one way to open a named input (``specmon/smallfile.py``) does with each kind of path,
what the local follower does with a FIFO, what reading a log whole does with a line that never
ends, and where a control character in a profile is said to be (issue 43, items 1, 2 and 7).

The command lines themselves are in ``test_hostile_inputs_files.py``; here the classes of input
are generated: every kind of path against every option, bytes written to a FIFO in any pieces,
lines of any length against any cap, a control character at any line of a profile.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specmon.config import ConfigError, parse_config
from specmon.smallfile import InputError, check_input, open_input, read_small_text, size_text
from specmon.sources.base import ConnectionState
from specmon.sources.lines import LineSplitter
from specmon.sources.local import LocalTailSource
from specmon.sources.logfiles import LogFileError, iter_line_batches

# --------------------------------------------------------------------------- the kinds of path

KINDS = ["regular", "fifo", "device", "directory", "socket", "missing", "no-folder"]


def _make(kind: str, tmp: Path) -> tuple[Path, object]:
    """A path of this kind (and what must stay alive for it: a bound socket)."""
    path = tmp / f"input-{kind}"
    keep: object = None
    if kind == "regular":
        path.write_text("hello\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        path = tmp / "s.sock"
        keep = socket.socket(socket.AF_UNIX)
        keep.bind(str(path))
    elif kind == "no-folder":
        path = tmp / "no such folder" / "x.log"
    return path, keep


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), stream=st.booleans(), wait=st.booleans(),
       limit=st.one_of(st.none(), st.integers(0, 12)))
def test_every_kind_of_path_is_usable_or_one_sentence_naming_it(tmp_path_factory: pytest.TempPathFactory, kind: str,
                                                                  stream: bool, wait: bool, limit: int | None) -> None:
    tmp = tmp_path_factory.mktemp("k")
    path, keep = _make(kind, tmp)
    try:
        start = time.monotonic()
        try:
            info = check_input(path, "log file", stream=stream, wait=wait, limit=limit)
        except InputError as exc:
            said = str(exc)
            assert str(path) in said and "\n" not in said
            expected = {"fifo": "is a FIFO", "device": "is a character device", "directory": "is a directory",
                        "socket": "is a socket", "missing": "no such file",
                        "no-folder": "does not exist" if wait else "no such file",
                        "regular": "larger than"}[kind]
            assert expected in said, said
            # What is refused is exactly what this option cannot take.
            assert not (kind == "fifo" and stream)
            assert not (kind == "missing" and wait)
            assert kind != "regular" or (limit is not None and limit < 6)
        else:
            if kind == "missing":
                assert wait and info is None
            else:
                assert kind == "regular" or (kind == "fifo" and stream)
                assert info is not None
        assert time.monotonic() - start < 0.5  # nothing blocked
    finally:
        if keep is not None:
            keep.close()  # type: ignore[attr-defined]


def test_open_input_never_blocks_on_a_fifo_and_checks_what_it_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    start = time.monotonic()
    fd, info = open_input(fifo, "log file", stream=True)  # no writer: a blocking open waits for ever
    try:
        assert stat.S_ISFIFO(info.st_mode)
        assert os.read(fd, 10) == b""  # no writer: nothing, at once
    finally:
        os.close(fd)
    with pytest.raises(InputError, match="is a FIFO"):
        open_input(fifo, "prompts file")
    with pytest.raises(InputError, match="is a character device"):
        read_small_text("/dev/zero", what="prompts file")
    assert time.monotonic() - start < 0.5


@given(st.integers(0, 10**15))
@example(999_500_000)  # rounds up to the next unit: "1 GB" (it said "1e+03 MB"; found by hypothesis in CI)
@example(9_999)
@example(999_950)
def test_size_text_is_exact_when_small_and_three_figures_otherwise(n: int) -> None:
    text = size_text(n)
    if n < 10_000:
        assert text == f"{n:,} bytes"
    else:
        number, unit = text.split()
        scale = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
        assert abs(float(number) * scale - n) <= 0.005 * n  # three significant figures
        assert 1 <= float(number) < 1000 or unit == "TB"


# --------------------------------------------------------------------------- the local follower


def _lines_of(data: bytes, max_line: int) -> list[str]:
    """The lines a follower gives for ``data`` read from a file: the reference for the FIFO."""
    split = LineSplitter(max_line=max_line)
    return split.feed(data)


async def _follow_fifo(fifo: Path, pieces: list[bytes], writers: int, max_line: int) -> list[str]:
    source = LocalTailSource(fifo, poll_interval=0.005, max_line=max_line)
    got: list[str] = []

    async def read() -> None:
        async for batch in source.batches():
            got.extend(batch)

    task = asyncio.create_task(read())
    share = max(1, -(-len(pieces) // writers))
    for w in range(writers):  # one writer after another, as a log shipper that reconnects
        fd = -1
        for _ in range(2000):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:  # the follower has not opened it yet
                await asyncio.sleep(0.005)
        assert fd >= 0
        os.set_blocking(fd, True)
        for piece in pieces[w * share:(w + 1) * share]:
            os.write(fd, piece)
            await asyncio.sleep(0)
        os.close(fd)
        await asyncio.sleep(0.02)
    want = sum(p.count(b"\n") for p in pieces)
    for _ in range(2000):
        if len(got) >= want:
            break
        await asyncio.sleep(0.005)
    assert source.status.state is ConnectionState.LIVE and "FIFO" in source.status.detail
    await source.close()
    await asyncio.wait_for(task, 5)
    return got


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=["Cs"]), max_size=60),
                      min_size=1, max_size=40),
       cuts=st.lists(st.integers(1, 97), max_size=30), writers=st.integers(1, 3), max_line=st.integers(8, 200))
def test_a_fifo_gives_the_lines_a_file_would_in_any_pieces_and_any_writers(
        tmp_path_factory: pytest.TempPathFactory, lines: list[str], cuts: list[int], writers: int,
        max_line: int) -> None:
    data = "".join(f"{line}\n" for line in lines).encode()
    pieces, at = [], 0
    for cut in cuts:
        if at >= len(data):
            break
        pieces.append(data[at:at + cut])
        at += cut
    if at < len(data):
        pieces.append(data[at:])
    fifo = tmp_path_factory.mktemp("f") / "ship.pipe"
    os.mkfifo(fifo)
    got = asyncio.run(_follow_fifo(fifo, pieces, writers, max_line))
    assert got == _lines_of(data, max_line)


async def test_a_device_or_a_socket_as_the_log_fails_with_its_sentence(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s.sock"))
    try:
        for path, said in ((Path("/dev/zero"), "is a character device"), (tmp_path / "s.sock", "is a socket")):
            source = LocalTailSource(path, poll_interval=0.01)
            start = time.monotonic()
            batches = [b async for b in source.batches()]  # ends by itself: nothing is read
            assert batches == [] and time.monotonic() - start < 1
            assert source.status.state is ConnectionState.FAILED
            assert said in source.status.detail and str(path) in source.status.detail
    finally:
        sock.close()


# --------------------------------------------------------------------------- a log read whole


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(0, 300), min_size=1, max_size=12), chunk=st.integers(1, 64),
       max_line=st.integers(1, 100), final_newline=st.booleans())
def test_reading_a_log_whole_keeps_every_line_and_bounds_each(tmp_path_factory: pytest.TempPathFactory,
                                                              lengths: list[int], chunk: int, max_line: int,
                                                              final_newline: bool) -> None:
    lines = [(chr(ord("a") + i % 26) * n) for i, n in enumerate(lengths)]
    text = "\n".join(lines) + ("\n" if final_newline else "")
    path = tmp_path_factory.mktemp("w") / "x.log"
    path.write_text(text)
    got = [line for batch in iter_line_batches(path, chunk=chunk, max_line=max_line) for line in batch]
    want = text.split("\n")
    if final_newline or want[-1] == "":
        want = want[:-1]
    assert len(got) == len(want)  # no line lost or split: line numbers stay right
    for g, w in zip(got, want, strict=True):
        assert w.startswith(g)  # a line is itself, or its start
        assert g == w or len(g) >= max_line  # cut only when long
        assert len(g) <= chunk + max_line  # memory bounded whatever the line's length


def test_a_sparse_log_is_read_in_bounded_memory_and_whole_reads_refuse_a_fifo(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as f:
        f.truncate(64 << 20)  # 64 MB of NULs, no newline
    batches = list(iter_line_batches(sparse, max_line=1 << 20))
    lines = [line for batch in batches for line in batch]
    assert len(lines) == 1 and len(lines[0]) == 1 << 20
    assert len(batches) > 32  # the skipped rest handed back a turn per chunk
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(LogFileError, match=r"is a FIFO .*save the stream to a file first"):
        next(iter_line_batches(fifo))


# --------------------------------------------------------------------------- a profile's lines

NOTES = st.sampled_from(["", "# a comment", "# U+2028 \u2028 and U+0085 \u0085 in a comment", "# \\u0007 said"])
FILLER = st.one_of(NOTES, st.sampled_from(["lines = 20", 'theme = "specmon-dark"', "line_cap = 4096"]))


@settings(max_examples=200, deadline=None)
@given(before=st.lists(FILLER, max_size=8, unique=True), between=st.lists(NOTES, max_size=6),
       where=st.sampled_from(["log", "host", "argv", "replica"]),
       escape=st.sampled_from(["\\u0007", "\\u001b", "\\t", "\\n", "\\u007f", "\\U00000001", "\\b"]))
def test_a_control_character_is_said_at_its_own_line(before: list[str], between: list[str], where: str,
                                                    escape: str) -> None:
    head = ["[profiles.kimi]", *before]
    if where in ("log", "host"):
        body = [*between, f'{where} = "/a{escape}b"']
    elif where == "argv":
        body = ["[profiles.kimi.launch]", 'log = "/x/{steps}.log"', 'argv = ["python3", "-m",',
                *[f'  "--opt{i}",' for i in range(len(between))], f'  "--x", "a{escape}b",', '  "{steps}"]']
    else:
        body = ["[[profiles.kimi.replicas]]", 'host = "h1"', *between, "[[profiles.kimi.replicas]]",
                f'host = "h2{escape}"']
    lines = head + body
    text = "\n".join(lines) + "\n"
    wanted = next(i for i, line in enumerate(lines, 1) if escape in line and not line.startswith("#"))
    with pytest.raises(ConfigError) as info:
        parse_config(text, Path("c.toml"))
    assert "control character" in str(info.value), str(info.value)
    assert info.value.line == wanted, (str(info.value), text)
    assert str(info.value).startswith(f"c.toml:{wanted}: ")


def test_the_issue_s_case_line_9_not_4() -> None:
    text = "\n".join([
        "[profiles.kimi]", 'host = "gpu-1"', "",
        "[profiles.kimi.launch]",
        'argv = ["python3", "-m", "sglang.launch_server",',
        '        "--model-path", "/models/kimi",',
        '        "--port", "30000",',
        '        "--speculative-num-steps", "{steps}",',
        '        "--tp", "8\\u0007"]',
        'log = "/data/kimi_{steps}.log"']) + "\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, Path("c.toml"))
    assert info.value.line == 9 and str(info.value).startswith("c.toml:9: "), str(info.value)


def test_prompts_and_state_read_whole_refuse_what_is_no_small_file(tmp_path: Path) -> None:
    from specmon.control.load import LoadError, load_prompts
    from specmon.experiment.sweep_state import read_state

    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(300_000_000)
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    start = time.monotonic()
    for path, said in ((big, "300 MB, larger than the 256 MB limit for a prompts file"), (fifo, "is a FIFO"),
                       (Path("/dev/zero"), "is a character device")):
        with pytest.raises(LoadError, match=said):
            load_prompts(path)
        with pytest.raises(InputError):
            read_state(path)
    assert time.monotonic() - start < 1
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"prompt": "hi"}) + "\n")
    assert load_prompts(ok) == ("hi",)


def test_a_theme_file_that_is_no_file_is_named_by_check_theme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specmon.commands.argtypes import check_theme

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path))
    from specmon import paths

    themes = paths.themes_dir()
    themes.mkdir(parents=True)
    (themes / "mine.toml").symlink_to("/dev/zero")
    with open(themes / "huge.toml", "wb") as f:
        f.truncate(2 << 30)
    start = time.monotonic()
    said = check_theme("mine")
    assert time.monotonic() - start < 1
    assert said is not None and "unknown theme 'mine'" in said and "mine.toml is a character device" in said, said


# --------------------------------------------------------------------------- the bulk path (and C)

#: Megabytes of NULs in the hole (the sanitizer run sets SPECMON_HOSTILE_MB=100; a NUL line costs the
#: line parser's marker search about 0.1-0.2 s per MB here, so the hole stops at 16).
HOLE_MB = min(int(os.environ.get("SPECMON_HOSTILE_MB", "4")), 16)
REAL_LOG = Path(__file__).resolve().parents[2] / "tests" / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"


def test_the_bulk_path_reads_around_a_sparse_hole_and_refuses_a_fifo_and_a_device(tmp_path: Path) -> None:
    """The hostile-input corpus of the sanitizer run (``.ci/sanitize``): a log with megabytes of NULs
    and no newline between two real copies goes through the C template pass whole; a FIFO or a
    device as a log never reaches it."""
    from specmon.ingest.summarize import ingest_files

    real = REAL_LOG.read_bytes()
    holes = tmp_path / "holes.log"
    with open(holes, "wb") as f:
        f.write(real)
        f.truncate(len(real) + (HOLE_MB << 20))
        f.seek(0, os.SEEK_END)
        f.write(b"\n" + real)
    alone = ingest_files([str(REAL_LOG)], jobs=1)
    both = ingest_files([str(holes)], jobs=2)
    assert both.counts["decode"] == 2 * alone.counts["decode"] > 0  # every real line on both sides read
    assert both.lines == 2 * alone.lines + 1  # and the hole is one line
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    for path, said in ((fifo, "is a FIFO"), (Path("/dev/zero"), "is a character device")):
        start = time.monotonic()
        with pytest.raises(LogFileError, match=said):
            ingest_files([str(path)], jobs=2)
        assert time.monotonic() - start < 0.5
