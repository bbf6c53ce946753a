"""The engines' one interface (issue 33): each engine module declares, the rest asks.

And the fourth engine proves it: TensorRT-LLM is recognised from its real excerpts,
its iteration lines are read, and a managed profile with ``engine = "trtllm"``
restarts a server (a stand-in process that prints TensorRT-LLM's real lines: there is
no TensorRT-LLM without a GPU here) through the same controller as every engine.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.engines import ADAPTERS, KINDS, NAMES, adapter, by_name
from specmon.ingest.files import ingest_file
from specmon.model.session import ServerState, Session
from specmon.parsing import LineParser, detect_engine
from specmon.parsing.lifecycle import _GATE, MARKERS, match_lifecycle
from specmon.records import Engine, Event
from tests.support.ptyproc import running
from tests.support.realdata import read_lines


def test_every_engine_has_one_adapter_and_the_list_is_spelled_once() -> None:
    assert {a.engine for a in ADAPTERS} == set(Engine) - {Engine.UNKNOWN}
    assert set(NAMES) == {e.value for e in Engine}
    for a in ADAPTERS:
        assert adapter(a.engine) is a and by_name(a.engine.value) is a
        assert all(k.engine is a.engine for k in a.kinds), a.label
    assert adapter(Engine.UNKNOWN).warmup == max(a.warmup for a in ADAPTERS)
    assert by_name("tgi") is None and by_name("") is None


def test_every_lifecycle_marker_passes_the_cheap_gate() -> None:
    """The gate is a hand-kept list of fragments: a marker an engine adds must pass it."""
    for phrase, event, _engines in MARKERS:
        assert any(g in phrase for g in _GATE), phrase
        assert match_lifecycle(f"prefix {phrase} suffix", Engine.UNKNOWN) is not None or event is Event.READY


def test_units_are_the_engines_own() -> None:
    assert adapter(Engine.VLLM).steps_unit("ngram") == "token"
    assert adapter(Engine.LLAMACPP).steps_unit("draft-simple") == "token"
    assert adapter(Engine.SGLANG).steps_unit("EAGLE3") == "step"
    assert adapter(Engine.SGLANG).steps_unit("NGRAM") == "token"


def test_dispatch_order_is_the_adapters() -> None:
    assert tuple(k for a in ADAPTERS for k in a.kinds) == KINDS


# -- TensorRT-LLM ------------------------------------------------------------------------------


def test_trtllm_real_excerpts_are_recognised_and_read() -> None:
    assert detect_engine(read_lines("trtllm_iter_log_2025_04.log")) is Engine.TRTLLM
    assert detect_engine(read_lines("trtllm_triton_backend_stats_json_1.log")) is Engine.TRTLLM
    parser = LineParser(year=2025)
    recs = [parser.parse(line, i) for i, line in enumerate(read_lines("trtllm_iter_log_2025_04.log"), 1)]
    assert [r.running if r is not None else "none" for r in recs] == [None, 10]  # type: ignore[union-attr]
    assert recs[1] is not None and recs[1].timestamp == pytest.approx(1745834204.0)  # 2025-04-28 09:56:44 UTC
    # No throughput from these lines: num_generation_tokens counts processed drafts too.
    assert all(getattr(r, "gen_throughput", None) is None for r in recs)


def test_an_unknown_engine_name_is_refused_with_the_list() -> None:
    with pytest.raises(ValidationError) as err:
        LaunchProfile(mode="managed", engine="tgi", argv=["x", "{steps}"], log="/tmp/x.log", ready_marker="r")
    assert "trtllm" in str(err.value) and "'tgi'" in str(err.value)


SERVER = r'''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
lines = open(sys.argv[2]).read().splitlines()
print("[12/04/2026-10:00:00] [TRT-LLM] [I] Starting trtllm-serve, draft length", sys.argv[1], flush=True)
print("INFO:     Application startup complete.", flush=True)
for line in lines:
    print(line, flush=True)
while True:
    time.sleep(0.05)
'''


async def test_a_trtllm_profile_restarts_through_the_controller(tmp_path: Path) -> None:
    script = tmp_path / "trtllm_standin.py"
    script.write_text(SERVER)
    excerpt = tmp_path / "iter.log"
    excerpt.write_text("\n".join(read_lines("trtllm_iter_log_2025_04.log")) + "\n")
    profile = LaunchProfile(mode="managed", engine="trtllm",
                            argv=[sys.executable, str(script), "{steps}", str(excerpt)],
                            log=str(tmp_path / "trt_{steps}.log"), pidfile=str(tmp_path / "trt.pid"),
                            ready_marker=adapter(Engine.TRTLLM).ready_marker, start_timeout_s=30,
                            stop_grace_s=5, stop_signal="TERM")
    ctl = RestartController(profile, LocalRunner(), host="gpu-box", ready_poll_s=0.1)
    pid = None
    try:
        plan = ctl.plan_for(3)
        ctl.describe(plan)  # shown first, as every command is
        view = await ctl.run(plan)
        assert view.phase.value == "ready", view.message
        pid = int((tmp_path / "trt.pid").read_text().split()[0])
        for _ in range(100):  # until the stand-in has written its lines (a bound, not a timing claim)
            if (tmp_path / "trt_3.log").read_text().count("elapsed_time") == 2:
                break
            time.sleep(0.05)
        session = Session()
        ingest_file(session, str(tmp_path / "trt_3.log"))
        assert session.engine is Engine.TRTLLM
        assert session.runs[-1].state is ServerState.SERVING
        assert any(e.text.startswith("ready") for e in session.events)
    finally:
        await ctl.close()
        if pid is not None and running(pid):
            os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            if pid is None or not running(pid):
                break
            time.sleep(0.05)
