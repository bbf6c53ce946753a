"""What the Prometheus fleet makes of each poll (states, configurations, the windows kept), and a
Prometheus that does not answer: bounded, a state, never an exception.

The polls here are the source's own answer type built by hand (what the fleet does with an
answer); the real Prometheus answers in tests/unit/test_prometheus_fleet.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from specmon.commands.prom_fleet import poll_interval
from specmon.ingest.prom_fleet import PromFleet, config_of
from specmon.model.fleet import FleetModel, ReplicaState
from specmon.records import Engine
from specmon.sources.prometheus_fleet import InstanceFigures, Poll, PrometheusFleetSource
from specmon.sources.promql import parse_selector

WINDOW = 10


def fleet() -> PromFleet:
    return PromFleet(PrometheusFleetSource("http://127.0.0.1:9", parse_selector('{job="vllm"}'), window_s=WINDOW))


def vllm(tps: float, k: int | None = 3, up: float | None = 1.0) -> InstanceFigures:
    return InstanceFigures(Engine.VLLM, tps=tps, accept_len=2.5, accept_rate=0.5, spec_tokens=k, up=up)


def states(f: PromFleet) -> dict[str, tuple[ReplicaState, str]]:
    return {i.name: (i.rates.state, i.rates.state_text) for i in f.inputs() if i.rates is not None}


def test_one_window_is_kept_per_window_and_the_idle_ones_are_left_out() -> None:
    f = fleet()
    for t in range(0, 41, 2):  # a poll every 2 s, a 10 s window
        f.take(Poll(float(t), 0.01, {"a:1": vllm(100.0 + t if t != 20 else 0.0)}))
    (inp,) = f.inputs()
    assert inp.rates is not None
    # The first window kept is a whole window after first sight (10); t = 20 was idle: the next kept
    # one is at 22, and then 32 (a window later).
    assert inp.rates.tps_samples == (110.0, 122.0, 132.0)
    assert inp.rates.tps == 140.0 and inp.rates.state is ReplicaState.LIVE


def test_a_new_setting_starts_the_windows_again_a_window_later() -> None:
    f = fleet()
    for t in (0, 10, 20):
        f.take(Poll(float(t), 0.01, {"a:1": vllm(100.0)}))
    f.take(Poll(25.0, 0.01, {"a:1": vllm(90.0, k=5)}))
    f.take(Poll(30.0, 0.01, {"a:1": vllm(90.0, k=5)}))
    (inp,) = f.inputs()
    assert inp.rates is not None and inp.rates.tps_samples == ()
    f.take(Poll(35.0, 0.01, {"a:1": vllm(91.0, k=5)}))
    (inp,) = f.inputs()
    assert inp.rates is not None and inp.rates.tps_samples == (91.0,)
    assert inp.rates.config == "5 spec tokens (method unknown)"


def test_states_down_gone_no_data_idle_and_no_answer() -> None:
    f = fleet()
    f.take(Poll(0.0, 0.01, {"a:1": vllm(100.0), "b:1": vllm(100.0), "c:1": InstanceFigures(up=1.0),
                            "d:1": vllm(0.0)}))
    assert states(f) == {"a:1": (ReplicaState.LIVE, "live"), "b:1": (ReplicaState.LIVE, "live"),
                         "c:1": (ReplicaState.NO_DATA, "no data yet"), "d:1": (ReplicaState.QUIET, "idle")}
    f.take(Poll(5.0, 0.01, {"a:1": vllm(100.0, up=0.0), "c:1": InstanceFigures(up=1.0), "d:1": vllm(0.0)}))
    got = states(f)
    assert got["a:1"] == (ReplicaState.DOWN, "down") and got["b:1"] == (ReplicaState.MISSING, "gone")
    f.take(Poll(10.0, 0.01, problem="cannot reach Prometheus at http://127.0.0.1:9 (ConnectError: refused)"))
    assert {s for s, _ in states(f).values()} == {ReplicaState.UNREADABLE}
    inp = next(i for i in f.inputs() if i.name == "b:1")
    assert inp.rates is not None and inp.rates.tps == 100.0  # the last figures stay
    assert "ConnectError" in inp.rates.detail and "figures as of" in inp.rates.detail
    assert "ConnectError" in f.status_text() and "last answer" in f.status_text()


def test_rows_in_the_order_first_seen_and_configurations_only_where_known() -> None:
    f = fleet()
    f.take(Poll(0.0, 0.01, {"b:1": vllm(100.0), "a:1": vllm(100.0, k=2)}))
    f.take(Poll(1.0, 0.01, {"b:1": vllm(100.0), "a:1": vllm(100.0, k=2), "0:1": vllm(100.0)}))
    assert [i.name for i in f.inputs()] == ["a:1", "b:1", "0:1"]
    snap = FleetModel().snapshot(f.inputs(), 1.0, f.status_text())
    assert {p.label: p.replicas for p in snap.configs} == {"2 spec tokens (method unknown)": 1,
                                                          "3 spec tokens (method unknown)": 2}
    assert snap.source.startswith('Prometheus http://127.0.0.1:9 {job="vllm"}, rates over 10s: answered')
    assert config_of(Engine.LLAMACPP, None) == ("unknown config", None)
    assert config_of(Engine.VLLM, None)[0] == "no spec counters"


def test_unknown_configurations_are_compared_with_nothing() -> None:
    f = fleet()
    llama = {f"h{i}:1": InstanceFigures(Engine.LLAMACPP, tps=100.0 if i else 30.0, up=1.0) for i in range(5)}
    for t in range(0, 200, 10):
        f.take(Poll(float(t), 0.01, llama))
    snap = FleetModel().snapshot(f.inputs(), 200.0)
    assert snap.configs == () and snap.outliers == 0
    assert {r.config for r in snap.replicas} == {"unknown config"}
    # The same fleet as vLLM with a known setting: the slow one is flagged.
    f = fleet()
    for t in range(0, 200, 10):
        f.take(Poll(float(t), 0.01, {k: vllm(v.tps or 0.0) for k, v in llama.items()}))
    snap = FleetModel().snapshot(f.inputs(), 200.0)
    assert [r.flags for r in snap.replicas if r.flags] == [("slow",)]


@pytest.mark.parametrize(("window", "every"), [(60, 5.0), (4, 1.0), (8, 2.0), (1, 1.0)])
def test_poll_interval(window: int, every: float) -> None:
    assert poll_interval(window) == every


# -- a Prometheus that does not answer -------------------------------------------------------------------

@pytest.fixture
def silent_port() -> Iterator[int]:
    """A socket that accepts connections and never answers (a hung Prometheus)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens


async def test_a_silent_prometheus_is_a_problem_within_the_bound(silent_port: int) -> None:
    source = PrometheusFleetSource(f"http://127.0.0.1:{silent_port}", parse_selector("{}"), timeout_s=0.5)
    started = time.monotonic()
    try:
        poll = await source.poll()
    finally:
        await source.close()
    assert time.monotonic() - started < 3.0
    assert poll.problem is not None and "did not answer within 0.5 s" in poll.problem
    assert poll.instances == {}


async def test_a_prometheus_that_is_down_is_a_problem_and_the_fleet_keeps_polling(closed_port: int) -> None:
    # A refused connection comes back at once; the bound is only there for a machine so loaded
    # that the event loop itself is late (1 s was exceeded at load average 13).
    source = PrometheusFleetSource(f"http://127.0.0.1:{closed_port}", parse_selector("{}"), timeout_s=10.0)
    f = PromFleet(source, interval_s=0.05)
    task = asyncio.create_task(f.run())
    try:
        for _ in range(1000):  # a bound (20 s), not a timing claim
            if f.polls >= 3:
                break
            await asyncio.sleep(0.02)
    finally:
        await f.close()
        await asyncio.wait_for(task, 5)
    assert f.polls >= 3 and f.last_poll is not None
    assert f.last_poll.problem is not None and "cannot reach Prometheus" in f.last_poll.problem
    assert "no answer yet" in f.status_text()
    assert source._client is None  # closed as the worker ended


# -- the command line ---------------------------------------------------------------------------------

FLEET_CONFIG = """
[profiles.fleet]
prometheus = "http://127.0.0.1:9"
selector = '{job="vllm"}'
"""


@pytest.mark.parametrize(("extra", "says"), [
    (["--log", "/x.log"], "--log does not apply to a fleet read through Prometheus (the replicas' figures come "
                          "from Prometheus, not a log)"),
    (["-i", "/k"], "--identity does not apply"),
    (["--warmup", "3"], "--warmup does not apply"),
    (["--record", "/tmp/x.rec"], "--record does not apply"),
    (["--theme", "no-such-theme"], "no-such-theme"),
])
def test_connect_to_a_fleet_profile_refuses_one_servers_options(tmp_path, capsys, extra, says) -> None:  # type: ignore[no-untyped-def]
    from specmon.cli import main

    config = tmp_path / "config.toml"
    config.write_text(FLEET_CONFIG)
    assert main(["connect", "fleet", "--config", str(config), *extra]) == 2
    assert says in capsys.readouterr().err


def test_a_bad_fleet_profile_is_the_config_files_sentence(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from specmon.cli import main

    config = tmp_path / "config.toml"
    config.write_text(FLEET_CONFIG.replace("'{job=\"vllm\"}'", "'vllm:generation_tokens_total'"))
    assert main(["connect", "fleet", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "config.toml:4: profiles.fleet.selector: selector must be a label-matcher set in braces" in err
