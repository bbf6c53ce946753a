"""Restart-time history per host and the ETA computed from it (pure, no processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon import paths
from specmon.control.eta import (
    HISTORY_KEPT,
    TIMED_PHASES,
    EtaStore,
    estimate,
)

FULL = {"stopping": 10.0, "starting": 20.0, "loading": 400.0, "capturing": 120.0}


def test_store_round_trips_per_host(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "times.json"
    store = EtaStore(path)
    store.record("gpu-box", FULL)
    store.record("other", {**FULL, "loading": 100.0})
    again = EtaStore(path)
    assert again.medians("gpu-box") == FULL
    assert again.medians("other")["loading"] == 100.0
    assert again.count("gpu-box") == 1 and again.count("nowhere") == 0
    assert again.medians("nowhere") == {}
    assert json.loads(path.read_text())["version"] == 1


def test_median_resists_one_slow_restart(tmp_path: Path) -> None:
    store = EtaStore(tmp_path / "t.json")
    for loading in (400.0, 410.0, 3000.0):  # one cold page cache
        store.record("h", {**FULL, "loading": loading})
    assert store.medians("h")["loading"] == 410.0


def test_history_is_bounded(tmp_path: Path) -> None:
    store = EtaStore(tmp_path / "t.json")
    for i in range(HISTORY_KEPT + 5):
        store.record("h", {**FULL, "stopping": float(i)})
    history = EtaStore(tmp_path / "t.json").history("h")
    assert len(history) == HISTORY_KEPT
    assert history[0]["stopping"] == 5.0  # the oldest were dropped


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"hosts": 3}'])
def test_damaged_file_is_an_empty_history_with_a_note(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    store = EtaStore(path)
    assert store.medians("h") == {}
    assert store.problem is not None and str(path) in store.problem
    store.record("h", FULL)  # and it can be written over
    assert EtaStore(path).medians("h") == FULL


def test_bad_values_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"hosts": {"h": [{"stopping": -1, "starting": "x", "loading": True,
                                                   "capturing": 5.0, "other": 1}]}}))
    assert EtaStore(path).history("h") == [{"capturing": 5.0}]


def test_unwritable_store_reports_instead_of_raising(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = EtaStore(blocker / "t.json")  # a file where a folder should be
    store.record("h", FULL)
    assert store.problem is not None and "could not save" in store.problem


def test_default_path_is_in_the_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert paths.eta_history_file() == tmp_path / "data" / "specmon" / "restart_times.json"
    assert EtaStore().path == paths.eta_history_file()


def test_no_history_no_estimate() -> None:
    est = estimate({}, "starting", 5.0, host="gpu-box")
    assert est.remaining_s is None and est.expected_total_s is None
    assert "no earlier restart on gpu-box" in est.basis


def test_history_gives_the_rest_of_the_phases() -> None:
    est = estimate(FULL, "starting", 5.0, runs=3, host="gpu-box")
    assert est.remaining_s == pytest.approx(15.0 + 400.0 + 120.0)
    assert est.expected_total_s == pytest.approx(550.0)
    assert est.basis == "3 earlier restarts on gpu-box"


def test_shard_rate_beats_history_while_loading() -> None:
    # 16 of 64 shards in 100 s: 300 s to go, then the typical graph capture.
    est = estimate(FULL, "loading", 100.0, load_progress=(16, 64), runs=1)
    assert est.remaining_s == pytest.approx(300.0 + 120.0)
    assert "shard rate" in est.basis and "1 earlier restart" in est.basis


def test_shard_rate_alone_says_when_loading_ends() -> None:
    est = estimate({}, "loading", 10.0, load_progress=(32, 64), host="h")
    assert est.remaining_s is None
    assert "loading ends in ~10 s" in est.basis


def test_overdue_phase_never_gives_negative_time() -> None:
    est = estimate(FULL, "capturing", 500.0, runs=2)
    assert est.remaining_s == 0.0


def test_zero_shards_done_falls_back_to_history() -> None:
    est = estimate(FULL, "loading", 50.0, load_progress=(0, 64), runs=1)
    assert est.remaining_s == pytest.approx(350.0 + 120.0)


def test_unknown_phase_is_an_error() -> None:
    with pytest.raises(ValueError):
        estimate(FULL, "ready", 0.0)
    assert TIMED_PHASES == ("stopping", "starting", "loading", "capturing")
