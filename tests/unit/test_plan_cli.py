"""The plan from the command line, a profile and a recording (issue 41): a sweep whose whole plan lives in
a profile runs as ``specmon sweep PROFILE -y``; its recording holds the plan; ``sweep --plan RECORDING
--fresh`` runs the same plan again; ``--print-plan`` names where every value came from; ``sweep --help``
is grouped, starts with examples, lists at most 20 options and is whole at 80 columns."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.cli import main
from specmon.experiment.plan import GROUPS, PRESETS, ExperimentPlan, PlanError
from specmon.experiment.plan_sources import resolve
from tests.support.sweepcli import sim_launch

ROOT = Path(__file__).resolve().parents[2]


def specmon(args: list[str], tmp_path: Path, timeout: float = 170) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "specmon", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _start_meta(path: Path) -> dict[str, Any]:
    first = json.loads(path.read_text().splitlines()[0])
    assert first["type"] == "meta" and first["event"] == "start"
    return first  # type: ignore[no-any-return]


def _plan_event(path: Path) -> str:
    """What the sweep said of its plan (its settings, order and looks), from its recording."""
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("event") == "sweep" and entry.get("kind") == "plan":
            return str(entry["text"])
    raise AssertionError("no plan event")


def test_a_recorded_demo_plan_runs_again_the_same(tmp_path: Path) -> None:
    first_rec = tmp_path / "first.jsonl"
    proc = specmon(["sweep", "--demo", "--steps", "0,2", "--order", "given", "--max-samples", "120", "--looks", "3",
                    "--seed", "5", "--format", "json", "--record", str(first_rec)], tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    plan = _start_meta(first_rec)["plan"]
    # The plan as run, less the invocation's own (where it was recorded is not part of it).
    assert plan == {"demo": True, "steps": [0, 2], "order": "given", "max_samples": 120, "looks": 3, "seed": 5,
                    "format": "json"}
    again_rec = tmp_path / "again.jsonl"
    again = specmon(["sweep", "--plan", str(first_rec), "--fresh", "--record", str(again_rec)], tmp_path)
    assert again.returncode in (0, 1), again.stderr[-3000:]
    assert _start_meta(again_rec)["plan"] == plan  # the same experiment
    doc = json.loads(again.stdout)  # format json came with the plan
    assert [r["steps"] for r in doc["runs"]] == [0, 2] and all(r["launches"] == 1 for r in doc["runs"])
    assert _plan_event(again_rec) == _plan_event(first_rec)  # the same looks at the same sample counts
    assert first_rec.stat().st_size > 0 and _start_meta(first_rec)["plan"] == plan  # the source untouched
    # The report names the plan and the command that runs it again.
    report = specmon(["report", str(again_rec)], tmp_path)
    assert report.returncode == 0, report.stderr
    assert "plan: demo true; steps" in report.stdout and "--plan again.jsonl --fresh" in report.stdout
    assert all(len(line) <= 80 for line in report.stdout.splitlines()[:12])


def test_a_profile_holds_the_whole_plan(tmp_path: Path) -> None:
    work = tmp_path / "srv"
    work.mkdir()
    config = tmp_path / "specmon.toml"
    config.write_text(sim_launch("sim", work) + (
        '\n[profiles.sim.sweep]\nsteps = "2,0"\norder = "given"\nmax_samples = 120\nlooks = 3\nfinish = "none"\n'
        'format = "json"\nno_record = true\n'
        '[profiles.sim.load]\nconcurrency = 1\nmax_tokens = 256\n'))
    try:
        printed = specmon(["sweep", "sim", "--config", str(config), "--print-plan", "--looks", "4"], tmp_path)
        assert printed.returncode == 0, printed.stderr
        lines = {ln.split()[0]: ln for ln in printed.stdout.splitlines() if ln.startswith("  ")}
        assert "(profile sim [sweep])" in lines["steps"] and "[2, 0]" in lines["steps"]
        assert "(command line)" in lines["looks"] and " 4 " in lines["looks"]
        assert "(profile sim [load])" in lines["max_tokens"]
        assert "(care standard)" in lines["alpha"] and "(default)" in lines["strategy"]
        assert "start:" not in printed.stderr  # nothing ran
        proc = specmon(["sweep", "sim", "--config", str(config), "-y"], tmp_path)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert [r["steps"] for r in doc["runs"]] == [2, 0] and all(r["launches"] == 1 for r in doc["runs"])
        assert "server stopped as asked (--finish none)" in proc.stderr
    finally:
        pidfile = work / "sim.pid"
        if pidfile.exists():
            try:
                os.killpg(int(pidfile.read_text().split()[0]), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


def test_profile_tables_are_checked_when_the_config_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "specmon.toml"
    config.write_text('[profiles.p]\nlog = "/x.log"\n[profiles.p.sweep]\nstpes = [0, 2]\n')
    assert main(["sweep", "p", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "stpes" in err and "did you mean 'steps'" in err and "Traceback" not in err
    config.write_text('[profiles.p]\nlog = "/x.log"\n[profiles.p.load]\nalpha = 0.01\n')
    assert main(["sweep", "p", "--config", str(config)]) == 2
    assert "'alpha' is not a load field" in capsys.readouterr().err


def test_a_plan_file_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[sweep]\ndemo = true\nsteps = [0, 1]\ncare = "quick"\n[load]\nconcurrency = [1, 4]\n')
    assert main(["sweep", "--plan", str(plan), "--print-plan", "--steps", "0,2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"steps\s+\[0, 2\]\s+\(command line\)", out)
    assert re.search(r"concurrency\s+\[1, 4\]\s+\(--plan plan.toml\)", out)
    assert re.search(r"max_samples\s+400\s+\(care quick\)", out)
    for text, words in (('steps = "x"\n', "steps"), ("[sweep\n", "neither a plan file"),
                        ('demo = true\nlooks = 0\n', "looks"), ('demo = true\nnope = 1\n', "unknown plan field 'nope'")):
        plan.write_text(text)
        assert main(["sweep", "--plan", str(plan)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["sweep", "--plan", str(fifo)]) == 2  # refused at once, never opened for a wait
    assert "fifo" in capsys.readouterr().err.lower()
    rec = tmp_path / "watch.jsonl"
    rec.write_text('{"type":"meta","event":"start","format":"specmon-recording","version":1,"command":"watch"}\n')
    assert main(["sweep", "--plan", str(rec)]) == 2
    assert "a recording without a plan" in capsys.readouterr().err


def test_sweep_help_is_grouped_starts_with_examples_and_fits(tmp_path: Path) -> None:
    proc = specmon(["sweep", "--help"], tmp_path)
    assert proc.returncode == 0
    text = proc.stdout
    assert text.index("examples:") < text.index("options:")
    listed = set(re.findall(r"^\s{2}(-{1,2}[a-z][a-z-]*)", text, re.M))
    assert len(listed) <= 20, sorted(listed)
    assert {"--steps", "--concurrency", "--objective", "--yes", "--plan", "--print-plan"} <= listed | {"--yes"}
    assert "--read-only" not in text and "--time-scale" not in listed
    assert max(len(line) for line in text.splitlines()) <= 80
    groups = re.findall(r"^([a-z][a-z ,]+):$", text, re.M)
    assert len(groups) >= 4


def test_the_parser_spells_the_plans_choices() -> None:
    from specmon.commands import control

    assert set(control.PRESETS) == set(PRESETS)
    assert set(control.DESIGNS) == set(ExperimentPlan.model_fields["design"].annotation.__args__)  # type: ignore[union-attr]
    assert set(control.ORDERS) == set(ExperimentPlan.model_fields["order"].annotation.__args__[0].__args__)  # type: ignore[union-attr]


def test_every_field_has_a_group_and_the_help_or_epilog_names_its_option() -> None:
    from specmon.commands.control import SWEEP_EPILOG
    from specmon.experiment.plan import flag

    help_text = _help()
    for name, f in ExperimentPlan.model_fields.items():
        extra = f.json_schema_extra
        assert isinstance(extra, dict) and extra["group"] in (*GROUPS, "run"), name
        if name == "profile":
            continue
        option = flag(name)
        assert option in help_text or option in SWEEP_EPILOG.replace("\n", " "), option


def _help() -> str:
    from specmon.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["sweep"].format_help()  # type: ignore[index]


_FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "looks": st.integers(1, 9), "alpha": st.floats(0.001, 0.5), "min_samples": st.integers(3, 200),
    "margin_pct": st.floats(0.1, 5), "order": st.sampled_from(["given", "launches"]),
    "concurrency": st.lists(st.integers(1, 32), min_size=1, max_size=3, unique=True),
    "seed": st.integers(0, 99), "max_tokens": st.integers(1, 999), "care": st.sampled_from(list(PRESETS)),
}


@settings(max_examples=200, deadline=None)
@given(layers=st.lists(st.dictionaries(st.sampled_from(sorted(_FIELD_VALUES)), st.just(None), max_size=4),
                       min_size=1, max_size=3), data=st.data())
def test_later_layers_win_and_origins_name_them(layers: list[dict[str, Any]], data: st.DataObject) -> None:
    filled = [(f"layer{i}", {k: data.draw(_FIELD_VALUES[k]) for k in layer}) for i, layer in enumerate(layers)]
    filled.insert(0, ("base", {"demo": True}))
    try:
        resolved = resolve(filled)
    except PlanError:
        return  # (a combination the rules refuse: min_samples over a preset's budget, ...)
    for name in _FIELD_VALUES:
        last = [(where, vals[name]) for where, vals in filled if name in vals]
        if last:
            assert getattr(resolved.plan, name) == last[-1][1] and resolved.origins[name] == last[-1][0]
    care = resolved.plan.care
    for knob, value in PRESETS[care].items():
        if not any(knob in vals for _, vals in filled):
            assert getattr(resolved.plan, knob) == value and resolved.origins[knob] == f"care {care}"
    # The saved plan resolves to the same plan.
    again = resolve([("saved", resolved.plan.saved())]).plan
    assert again.saved() == resolved.plan.saved() and again.sweep_plan().identity() == resolved.plan.sweep_plan().identity()


def test_the_dashboards_s_sweeps_with_the_profiles_plan(tmp_path: Path) -> None:
    """``connect PROFILE``: the profile's [sweep] and [load] reach the sweep flow behind ``s`` (its care,
    loads, order and load settings; the dialog picks the steps)."""
    from specmon.cli import build_parser
    from specmon.commands.remote import plan_connect

    config = tmp_path / "specmon.toml"
    config.write_text('[profiles.p]\nlog = "/x.log"\n[profiles.p.sweep]\ncare = "thorough"\norder = "given"\n'
                      'looks = 6\n[profiles.p.load]\nconcurrency = "1,8"\nmax_tokens = 64\n')
    args = build_parser().parse_args(["connect", "--profile", "p", "--config", str(config)])
    plan = plan_connect(args)
    assert plan.sweep == {"care": "thorough", "order": "given", "looks": 6, "concurrency": [1, 8], "max_tokens": 64}
    fields, load = ExperimentPlan.dashboard_parts(plan.sweep)
    rule = fields["rule"]
    assert (rule.looks, rule.max_samples, rule.alpha) == (6, PRESETS["thorough"]["max_samples"], PRESETS["thorough"]["alpha"])
    assert fields["concurrency"] == (1, 8) and fields["order"] == "given" and load["max_tokens"] == 64
    with pytest.raises(ValueError, match="nosuch.jsonl"):
        ExperimentPlan.dashboard_parts({"prompts": str(tmp_path / "nosuch.jsonl")})
