"""The configuration lines above a follower's first window (specmon.sources.preface).

Generated logs of several launches (SGLang, vLLM and llama.cpp configuration lines, each
launch followed by any number of other lines) and any window size: the lines found are the
last configuration block above the window, by an independent line-by-line reading; the
host's command (run here by the real ``sh``, ``tail``, ``head`` and ``grep``) finds the
same; and a follower that starts mid-log gives its session the latest launch's
configuration, not "unknown config" and not an older launch's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest.live import Feeder, FeedInput
from specmon.sources.local import LocalTailSource, start_of_last_lines
from specmon.sources.preface import (
    CONFIG_MARKERS,
    PREFACE_LINES,
    PREFACE_SPAN,
    local_preface,
    parse_grep,
    preface_command,
)
from tests.support.logtext import campaign, server_args

SAMPLE = Path(os.environ.get("SPECMON_SHARED", Path(__file__).resolve().parents[3] / "shared")) / \
    "real_server_llamacpp" / "logs" / "sample-draft.log"

LLAMA = ("0.00.062.351 I spec common_specu: adding speculative implementation 'draft-simple'\n"
         "0.00.062.367 I spec common_specu: - n_max={n}, n_min=0, p_min=0.000000\n")
VLLM = ("INFO 05-12 10:00:00 [api_server.py:1] non-default args: {{'model': 'm', 'speculative_config': "
        "{{'method': 'ngram', 'num_speculative_tokens': {n}}}}}\n")
FILLER = "0.00.779.958 I slot      release: id  0 | task 311 | stop processing: n_tokens = 132\n"


def launch_text(kind: str, n: int) -> str:
    if kind == "llama":
        return LLAMA.format(n=n)
    if kind == "vllm":
        return VLLM.format(n=n)
    return server_args(n) + "\n"


def oracle(data: bytes, start: int) -> list[str]:
    """The last configuration block above ``start``, read line by line."""
    found = []
    offset = 0
    for line in data[:start].split(b"\n"):
        text = line.decode("utf-8", "replace")
        if any(m in text for m in CONFIG_MARKERS):
            found.append((offset, text))
        offset += len(line) + 1
    if not found:
        return []
    last = found[-1][0]
    return [t for o, t in found[-PREFACE_LINES:] if last - o <= PREFACE_SPAN]


def host_preface(path: Path, start: int) -> list[str]:
    out = subprocess.run(["sh", "-c", preface_command(str(path), start)], capture_output=True, check=False).stdout
    return parse_grep(out, 1 << 20)


@settings(max_examples=120, deadline=None)
@given(launches=st.lists(st.tuples(st.sampled_from(["llama", "vllm", "sglang"]), st.integers(1, 8),
                                   st.integers(0, 60)), min_size=0, max_size=5),
       window=st.integers(0, 150), tail_newline=st.booleans())
def test_the_last_configuration_block_above_any_window(launches: list[tuple[str, int, int]], window: int,
                                                       tail_newline: bool) -> None:
    text = "".join(launch_text(kind, n) + FILLER * filler for kind, n, filler in launches) + FILLER * 3
    data = text.encode() if tail_newline else text.encode().rstrip(b"\n")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "server.log"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            start = start_of_last_lines(fd, len(data), window)
            got = local_preface(fd, start, 1 << 20)
        finally:
            os.close(fd)
        assert got == oracle(data, start)
        assert host_preface(path, start) == got  # what the host's command finds


def test_a_follower_started_mid_log_knows_the_latest_launch(tmp_path: Path) -> None:
    """Three launches appended to one log, the window inside the last one's samples."""
    log = tmp_path / "server.log"
    log.write_text("\n".join([*campaign(2, 90.0, 50), *campaign(3, 95.0, 50, start=100.0),
                              *campaign(4, 99.0, 300, start=200.0)]) + "\n")

    async def read(lines: int | None) -> str:
        source = LocalTailSource(log, lines=lines, poll_interval=0.02)
        feeder = Feeder([FeedInput(source)])
        task = asyncio.create_task(feeder.run())
        deadline = time.monotonic() + 20
        while feeder.session.current is None or not feeder.session.current.used:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        await feeder.close()
        task.cancel()
        run = feeder.session.current
        assert run is not None and run.config is not None, "unknown config"
        said = [e.text for e in feeder.session.events] + list(source.status.events)
        assert any("configuration lines" in t for t in said) == (lines is not None)
        return str(run.config.steps)

    assert asyncio.run(read(40)) == "4"  # the third launch's, found above the window
    assert asyncio.run(read(None)) == "4"  # the same as reading the whole file


def test_the_kits_real_llama_log_started_near_its_end() -> None:
    data = SAMPLE.read_bytes()
    fd = os.open(SAMPLE, os.O_RDONLY)
    try:
        start = start_of_last_lines(fd, len(data), 20)
        got = local_preface(fd, start, 1 << 20)
    finally:
        os.close(fd)
    setup = [line for line in data.decode().splitlines()
             if "common_specu: adding" in line or "common_specu: - " in line]
    assert start > 0 and got == setup[-PREFACE_LINES:]  # the set-up lines, not the per-request statistics
    assert any("n_max=4" in line for line in got)
    assert host_preface(SAMPLE, start) == got
