"""The bundled simulated campaign (sample_logs/sim_*.log): reproducible, parseable, and faithful."""

from __future__ import annotations

import re
import statistics
import sys
from functools import cache
from pathlib import Path

import pytest

from specmon.parsing import parse_lines
from specmon.records import Config, Decode, Unparsed
from specmon.sim.sweep import CAMPAIGN_STEPS, log_name, main, write_campaign

SAMPLES = Path(__file__).resolve().parents[2] / "sample_logs"
CAMPAIGN = {0: 88.8, 1: 85.1, 2: 94.0, 5: 86.7, 10: 60.0}
STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[^\]]*\] ")


@cache
def lines_of(steps: int) -> tuple[str, ...]:
    return tuple((SAMPLES / log_name(steps)).read_text(encoding="utf-8").splitlines())


@cache
def decodes(steps: int) -> tuple[Decode, ...]:
    return tuple(r for r in parse_lines(lines_of(steps)) if isinstance(r, Decode))


def test_regenerating_gives_the_committed_files(tmp_path: Path) -> None:
    paths = write_campaign(tmp_path, seed=7)
    assert [p.name for p in paths] == [log_name(n) for n in CAMPAIGN_STEPS]
    for p in paths:
        assert p.read_bytes() == (SAMPLES / p.name).read_bytes(), f"{p.name} is stale: rerun the sweep"


def test_other_seed_differs(tmp_path: Path) -> None:
    (p,) = write_campaign(tmp_path, seed=8, steps=(2,), decode_lines=50)
    assert p.read_bytes() != (SAMPLES / p.name).read_bytes()


@pytest.mark.parametrize("steps", CAMPAIGN_STEPS)
def test_every_line_parses_and_config_is_read(steps: int) -> None:
    records = list(parse_lines(lines_of(steps)))
    unparsed = [r for r in records if isinstance(r, Unparsed)]
    assert not unparsed, unparsed[:3]
    configs = [r for r in records if isinstance(r, Config)]
    assert len(configs) == 1
    cfg = configs[0]
    assert (cfg.steps or 0) == steps
    assert cfg.model == "moonshotai/Kimi-K2.5"
    if steps:
        assert (cfg.algorithm, cfg.topk, cfg.draft_tokens) == ("EAGLE3", 1, steps + 1)
    else:
        assert cfg.algorithm is None


@pytest.mark.parametrize("steps", CAMPAIGN_STEPS)
def test_files_are_batch_one_runs_of_useful_size(steps: int) -> None:
    size = (SAMPLES / log_name(steps)).stat().st_size
    assert size < 300_000
    ds = decodes(steps)
    assert 300 <= len(ds) <= 700
    assert {d.running_req for d in ds} == {1}
    assert all((d.accept_len is None) == (steps == 0) for d in ds)
    stamps = [m.group(1) for line in lines_of(steps) if (m := STAMP.match(line))]
    assert stamps == sorted(stamps)


def test_launches_follow_each_other() -> None:
    bounds = []
    for n in CAMPAIGN_STEPS:
        stamps = [m.group(1) for line in lines_of(n) if (m := STAMP.match(line))]
        bounds.append((stamps[0], stamps[-1]))
    for (_, end), (start, _) in zip(bounds, bounds[1:], strict=False):
        assert end < start


def steady(steps: int) -> list[float]:
    """Per-line throughput without the first line (its stats gap includes the idle wait)."""
    return [d.gen_throughput for d in decodes(steps)[1:] if d.gen_throughput is not None]


@pytest.mark.parametrize(("steps", "target"), sorted(CAMPAIGN.items()))
def test_file_means_match_the_campaign(steps: int, target: float) -> None:
    assert statistics.fmean(steady(steps)) == pytest.approx(target, rel=0.015)


def test_accept_lengths_match_the_campaign() -> None:
    mean_len = {n: statistics.fmean(d.accept_len for d in decodes(n) if d.accept_len) for n in CAMPAIGN_STEPS if n}
    assert mean_len[2] == pytest.approx(2.1, abs=0.05)
    assert 2.5 <= mean_len[10] <= 2.95
    assert mean_len[1] < mean_len[2] < mean_len[3] < mean_len[5] < mean_len[10]


def test_single_lines_swing_widely() -> None:
    base = steady(0)
    assert min(base) < 66 and max(base) > 92


def batch_means(xs: list[float], batches: int = 10) -> tuple[float, float]:
    """Mean and its standard error from non-overlapping batch means (handles autocorrelation)."""
    k = len(xs) // batches
    means = [statistics.fmean(xs[i * k : (i + 1) * k]) for i in range(batches)]
    return statistics.fmean(means), statistics.stdev(means) / batches**0.5


def test_two_steps_beats_the_runner_up_with_confidence() -> None:
    results = {n: batch_means(steady(n)) for n in CAMPAIGN_STEPS}
    ranked = sorted(results, key=lambda n: results[n][0], reverse=True)
    best, runner_up = ranked[0], ranked[1]
    assert (best, runner_up) == (2, 3)
    (m1, se1), (m2, se2) = results[best], results[runner_up]
    t_crit = 2.262  # Student t, 9 degrees of freedom, 95 % two-sided
    # Each configuration's 95 % interval excludes the other's: separated, not merely ranked.
    assert m1 - t_crit * se1 > m2 + t_crit * se2
    assert m1 > results[0][0] + t_crit * (se1 + results[0][1])  # and beats no speculation


def test_cli_writes_requested_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path), "--seed", "3", "--steps", "0,4", "--lines", "20"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim_eagle3_4step.log", "sim_eagle3_nospec.log"]
    assert "sim_eagle3_4step.log" in capsys.readouterr().out
    assert main(["--out", str(tmp_path), "--steps", "two"]) == 2
    assert "bad --steps" in capsys.readouterr().err


def test_sweep_module_runs_as_a_script(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "specmon.sim.sweep", "--out", str(tmp_path), "--steps", "1", "--lines", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "sim_eagle3_1step.log").read_text().count("Decode batch") >= 5
