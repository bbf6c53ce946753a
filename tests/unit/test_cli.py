"""The command line: every format and every error path, through the real entry point."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.cli import main
from tests.support import logtext as L


@pytest.fixture()
def sweep_files(tmp_path: Path) -> list[str]:
    files = []
    for steps, mean, start in ((None, 88.8, 0), (2, 94.0, 500), (5, 86.7, 1000)):
        p = tmp_path / f"run_{steps or 0}.log"
        p.write_text("\n".join(L.campaign(steps, mean, 60, start=start)) + "\n")
        files.append(str(p))
    return files


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_summarize_json_shape_and_verdict(sweep_files: list[str], capsys) -> None:
    code, out, _ = run_cli(["summarize", *sweep_files, "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["lines"] == 3 * 62
    assert set(doc["counts"]) >= {"decode", "prefill", "engine_stats", "spec", "lifecycle", "unparsed"}
    assert doc["counts"]["decode"] == 180
    assert [r["steps"] for r in doc["runs"]] == [0, 2, 5]
    for r in doc["runs"]:
        assert {"engine", "steps", "draft_tokens", "label", "samples", "throughput", "accept_len",
                "accept_rate", "vs_baseline_pct"} <= set(r)
        assert {"mean", "median", "ci95_low", "ci95_high"} <= set(r["throughput"])
    assert doc["runs"][0]["accept_len"] is None  # no speculation logs no acceptance
    assert doc["verdict"]["best_steps"] == 2
    # One launch per setting: the intervals rest on the assumed launch CV (5%), which a +6% gain
    # over one start each cannot beat; the verdict says what it rests on.
    assert doc["verdict"]["separated"] is False
    assert all(r["interval_covers"] == "1 launch + assumed launch CV 5%" for r in doc["runs"])
    assert doc["launch_model"]["estimated"] is False and doc["launch_model"]["launch_cv_pct"] == 5.0
    assert "assumed launch CV 5%" in doc["verdict"]["sentence"]
    assert doc["verdict"]["speedup_pct"] == pytest.approx(doc["runs"][1]["vs_baseline_pct"])
    assert doc["baseline"]["source"] == "run"
    # Told that launches do not vary (--launch-cv 0), the within-launch intervals are the whole story.
    code, out, _ = run_cli(["summarize", *sweep_files, "--format", "json", "--launch-cv", "0"], capsys)
    zero = json.loads(out)
    assert zero["verdict"]["separated"] is True and zero["verdict"]["best_steps"] == 2
    for r in zero["runs"]:  # one launch each at launch CV 0: the within-launch interval, to the digit
        assert [r["throughput"][k] for k in ("mean", "ci95_low", "ci95_high")] == \
            [r["within_launch"][k] for k in ("mean", "ci95_low", "ci95_high")]


def test_summarize_markdown_marks_best(sweep_files: list[str], capsys) -> None:
    code, out, _ = run_cli(["summarize", *sweep_files, "--format", "markdown"], capsys)
    assert code == 0
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert len(rows) == 4  # header + 3 configurations
    _, doc, _ = run_cli(["summarize", *sweep_files, "--format", "json"], capsys)
    answer = json.loads(doc)["verdict"]["answer"]
    # ★ only for a declared winner, ☆ for a leader not separated: the mark and its words are the answer's.
    mark, words = ("★", "winner") if answer["kind"] == "winner" else ("☆", "leads, undecided")
    assert answer["mark"] == mark and answer["words"].startswith(words)
    assert f"**{mark} EAGLE3 2 steps**" in out
    assert f"**Verdict ({mark} {answer['words']}):** EAGLE3 2 steps" in out
    assert ("no winner declared" in out) is (answer["kind"] == "undecided")


def test_summarize_csv_parses(sweep_files: list[str], capsys) -> None:
    code, out, _ = run_cli(["summarize", *sweep_files, "--format", "csv"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["steps"] for r in rows] == ["0", "2", "5"]
    assert [r["best"] for r in rows] == ["0", "1", "0"]
    assert float(rows[1]["tps_mean"]) > float(rows[0]["tps_mean"])


def test_summarize_table_default(sweep_files: list[str], capsys) -> None:
    code, out, _ = run_cli(["summarize", *sweep_files], capsys)
    assert code == 0
    assert "EAGLE3 2 steps" in out and "baseline" in out and ("★" in out or "☆" in out)
    assert not ("★" in out and "no winner declared" in out)


def test_baseline_options(sweep_files: list[str], capsys) -> None:
    code, out, _ = run_cli(["summarize", sweep_files[1], "--baseline", sweep_files[0], "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["baseline"]["source"] == "file" and doc["runs"][1]["vs_baseline_pct"] > 0
    code, out, _ = run_cli(["summarize", sweep_files[1], "--baseline-tps", "88.8", "--format", "json"], capsys)
    doc = json.loads(out)
    assert doc["baseline"] == {"source": "tps", "label": "88.8 tok/s (given)", "mean": 88.8, "throughput": None}
    with pytest.raises(SystemExit) as exc:
        main(["summarize", sweep_files[1], "--baseline-tps", "-3"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["summarize", sweep_files[1], "--baseline-tps", "5", "--baseline", sweep_files[0]])
    assert exc.value.code == 2


def test_missing_and_unreadable_files_exit_2(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(["summarize", str(tmp_path / "nope.log")], capsys)
    assert code == 2 and "no such file" in err and "Traceback" not in err
    code, _, err = run_cli(["summarize", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err
    if os.geteuid() != 0:  # root reads anything
        p = tmp_path / "locked.log"
        p.write_text("x\n")
        p.chmod(0)
        code, _, err = run_cli(["summarize", str(p)], capsys)
        assert code == 2 and "permission denied" in err


def test_empty_and_foreign_logs_exit_1(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, _, err = run_cli(["summarize", str(empty)], capsys)
    assert code == 1 and "no speculative-decoding lines found" in err
    foreign = tmp_path / "nginx.log"
    foreign.write_bytes(b'127.0.0.1 - - [29/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 612\n\xff\xfe garbage\n')
    code, _, err = run_cli(["summarize", str(foreign)], capsys)
    assert code == 1 and "no speculative-decoding lines found" in err


def test_parse_prints_records_in_order(tmp_path: Path, capsys) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([L.server_args(2), "noise", L.ready(3), L.decode(4, 90.5, 2.1, 0.7),
                            "[2026-08-23 09:00:05 TP0] Decode batch, #running-req: 1, #tok"]) + "\n")
    code, out, _ = run_cli(["parse", str(p)], capsys)
    assert code == 0
    recs = [json.loads(ln) for ln in out.splitlines()]
    assert [r["kind"] for r in recs] == ["config", "lifecycle", "decode", "unparsed"]
    assert [r["line"] for r in recs] == [1, 3, 4, 5]
    d = recs[2]
    assert d["timestamp"] == "2026-08-23T09:00:04" and d["rank"] == "TP0"
    assert (d["running_req"], d["tokens"], d["token_usage"], d["accept_len"], d["accept_rate"], d["graph"],
            d["gen_throughput"], d["queue_req"]) == (1, 1234, 0.02, 2.1, 0.7, True, 90.5, 0)
    assert recs[1]["event"] == "ready" and recs[0]["steps"] == 2


def test_console_script_runs_as_a_process(sweep_files: list[str]) -> None:
    exe = Path(sys.executable).with_name("specmon")
    proc = subprocess.run([str(exe), "summarize", *sweep_files, "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"]["best_steps"] == 2


def test_an_interrupt_while_the_modules_load_exits_130_without_a_traceback(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """^C in the first tenth of a second (the parser imports the commands' modules then): exit
    130 as later, no traceback, and the caller's garbage collector as it was."""
    import gc

    from specmon import cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    was = gc.isenabled()
    assert cli.main(["summarize", "x.log"]) == 130
    assert gc.isenabled() is was and gc.get_freeze_count() == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["summarize", "--format", "bogus", "x.log"],
    ["summarize"],
    ["bogus-command"],
    ["sweep", "--steps", "a,b", "--demo"],
    ["demo", "--steps", "99"],
    ["watch", "--no-such-option", "x.log"],
])
def test_a_usage_error_is_one_sentence_naming_the_command_and_its_help(argv: list[str], capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # not a usage block first
    assert not lines[0].startswith("usage:")
    command = "specmon" if argv[0] == "bogus-command" else f"specmon {argv[0]}"
    assert lines[0].startswith(f"{command}: ") and lines[0].endswith(f"(see `{command} --help`)")


def test_demo_help_does_not_offer_read_only_which_it_refuses(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--read-only" not in capsys.readouterr().out
    assert main(["demo", "--read-only"]) == 2
    assert "cannot run with --read-only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["watch", "--help"])
    assert "--read-only" in capsys.readouterr().out  # the others still offer it


def test_the_demo_step_limit_is_one_number_everywhere(capsys) -> None:  # type: ignore[no-untyped-def]
    from specmon.control.demo import DEMO_STEPS_MAX

    over = DEMO_STEPS_MAX + 1
    assert main(["sweep", "--demo", "--steps", f"0,{over}"]) == 2
    assert f"0 to {DEMO_STEPS_MAX}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--steps", str(over)])
    assert f"0 to {DEMO_STEPS_MAX}" in capsys.readouterr().err
