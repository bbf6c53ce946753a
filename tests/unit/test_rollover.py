"""Stamps without a date (or a year) get the file's date and stay in order across midnight / New Year.

Time-only SGLang prefixes (``[HH:MM:SS TP0]``) and vLLM's year-less ``MM-DD`` take the
file's first dated line, else its modification time (``--year`` overrides the year);
a large step back is the next day (year). Checked on generated sequences of steps, on
both parse paths, with the bulk path cut into many pieces.
"""

from __future__ import annotations

import json
import os
from calendar import timegm
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.cli import main
from specmon.grammar.prefix import Rollover
from specmon.ingest import feeding
from specmon.ingest.files import ingest_file, log_clock
from specmon.model.session import Session

MTIME = timegm((2025, 3, 4, 12, 0, 0))


def _decode(stamp: str, tput: float) -> str:
    return (f"[{stamp} TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.01, accept len: 2.00, "
            f"cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: 0")


def _hms(t: float) -> str:
    s = int(t) % 86400
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


steps = st.lists(st.integers(1, 6 * 3600), min_size=2, max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 86399), steps)
def test_rollover_counts_the_days_a_sequence_of_times_crosses(start: int, gaps: list[int]) -> None:
    day = float(timegm((2025, 3, 4, 0, 0, 0)))
    roll = Rollover("time", 2025)
    t = float(start)
    for g in [0, *gaps]:
        t += g
        assert roll.fix(day + t % 86400) == day + t
    # The column form gives the same, whatever the split.
    roll2 = Rollover("time", 2025)
    ts = [day + (start + sum(gaps[:i])) % 86400 for i in range(len(gaps) + 1)]
    half = len(ts) // 2
    assert roll2.fix_all(ts[:half]) + roll2.fix_all(ts[half:]) == [day + start + sum(gaps[:i])
                                                                  for i in range(len(gaps) + 1)]


def test_new_year_for_year_less_stamps() -> None:
    roll = Rollover("md", 2024)
    dec31 = float(timegm((2024, 12, 31, 23, 59, 50)))
    jan1_read_as_2024 = float(timegm((2024, 1, 1, 0, 0, 10)))
    assert roll.fix(dec31) == dec31
    assert roll.fix(jan1_read_as_2024) == float(timegm((2025, 1, 1, 0, 0, 10)))
    assert roll.fix(jan1_read_as_2024 + 5) == float(timegm((2025, 1, 1, 0, 0, 15)))


def _write(path: Path, start: int, gaps: list[int]) -> list[float]:
    t = float(start)
    times, lines = [], []
    for i, g in enumerate([0, *gaps]):
        t += g
        times.append(t)
        lines.append(_decode(_hms(t), 50 + i % 7))
        if i % 3 == 0:
            lines.append(f'[{_hms(t)}] INFO:     127.0.0.1:3766 - "POST /generate HTTP/1.1" 200 OK')
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (MTIME, MTIME))
    return times


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 86399), steps)
def test_both_paths_keep_time_only_logs_in_order_across_midnight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 start: int, gaps: list[int]) -> None:
    log = tmp_path / "timeonly.log"
    times = _write(log, start, gaps)
    day = float(timegm((2025, 3, 4, 0, 0, 0)))  # no dated line: the file's modification day
    slow = Session()
    ingest_file(slow, str(log))
    monkeypatch.setattr(feeding, "PIECE", 700)  # many pieces: the days carry across them
    fast = Session()
    feeding.ingest_file_fast(fast, str(log), jobs=1)
    assert slow.runs[-1].last_at == fast.runs[-1].last_at == day + times[-1]
    assert len(slow.runs) == len(fast.runs) == 1


def test_parse_dates_time_only_lines_never_1970_and_year_overrides(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "t.log"
    _write(log, 86390, [5, 10])  # 23:59:50, 23:59:55, then 00:00:05 the next day
    assert main(["parse", str(log)]) == 0
    stamps = [json.loads(x)["timestamp"] for x in capsys.readouterr().out.splitlines()]
    assert stamps == ["2025-03-04T23:59:50", "2025-03-04T23:59:55", "2025-03-05T00:00:05"]
    assert main(["parse", "--year", "2023", str(log)]) == 0
    stamps = [json.loads(x)["timestamp"] for x in capsys.readouterr().out.splitlines()]
    assert stamps[0] == "2023-03-04T23:59:50" and stamps[-1] == "2023-03-05T00:00:05"
    assert main(["summarize", "--year", "2023", "--format", "json", str(log)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "1970" not in json.dumps(doc)


def test_a_dated_line_gives_the_day_and_the_year(tmp_path: Path) -> None:
    log = tmp_path / "d.log"
    log.write_text("2024-12-30T10:00:00.000000000Z [10:00:00 TP0] Load weight begin. avail mem=10 GB\n"
                   + _decode("10:00:01", 50) + "\n")
    os.utime(log, (MTIME, MTIME))
    clock = log_clock(log, log.read_text().split("\n"))
    assert (clock.year, clock.mode) == (2024, "time")
    assert datetime.fromtimestamp(clock.day, tz=UTC).strftime("%Y-%m-%d") == "2024-12-30"
    assert log_clock(log, log.read_text().split("\n"), 2021).year == 2021


def test_bad_year_is_one_sentence_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "x.log"
    log.write_text(_decode("10:00:00", 50) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["summarize", "--year", "20x5", str(log)])
    assert exc.value.code == 2
    assert "not a year" in capsys.readouterr().err


@pytest.mark.parametrize("n", [50, 400])  # a line at a time, and blocks the bulk path reads
def test_report_year_overrides_the_recorded_year(tmp_path: Path, n: int) -> None:
    from specmon.output.recording import Recorder
    from specmon.output.report import load_report

    lines = [f"INFO 03-01 10:00:{i % 60:02d} [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
             f"Avg generation throughput: {50 + i % 9}.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs" for i in range(n)]
    rec_path = tmp_path / "r.jsonl"
    with Recorder(rec_path, meta={"command": "watch"}) as rec:
        rec.source("vllm.log", baseline=False, year=2024)
        rec.batch("vllm.log", 1, lines)
    for year, want in ((None, 2024), (2021, 2021)):
        data = load_report(rec_path, year=year)
        last = data.session.runs[-1].last_at
        assert last is not None and datetime.fromtimestamp(last, tz=UTC).year == want


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 86399), steps, st.lists(st.integers(1, 6), min_size=1, max_size=5),
       st.sampled_from(["time", "md"]), st.floats(0.0, 0.999))
def test_the_column_form_is_the_stamp_by_stamp_form_for_arrays_and_lists(start: int, gaps: list[int],
                                                                         cuts: list[int], mode: str,
                                                                         frac: float) -> None:
    """Columns as the bulk path hands them (array('d') without None, or lists), cut anywhere,
    after any number of midnights (New Years): the same doubles as fix() one stamp at a time."""
    from array import array

    span = 86400 if mode == "time" else 365 * 86400
    scale = 1 if mode == "time" else 365 * 4  # year-less stamps: steps of up to ~1 year
    day = float(timegm((2025, 3, 4, 0, 0, 0)))
    ts = [day + ((start + sum(gaps[:i]) * scale) % span) + frac for i in range(len(gaps) + 1)]
    one = Rollover(mode, 2025)
    expected = [one.fix(t) for t in ts]
    for packed in (False, True):
        roll = Rollover(mode, 2025)
        got: list[float | None] = []
        a = 0
        for c in [*cuts, len(ts)]:
            b = min(len(ts), a + c) if c != len(ts) else len(ts)
            part = ts[a:b]
            got += list(roll.fix_all(array("d", part) if packed else part))  # type: ignore[arg-type]
            a = b
            if a == len(ts):
                break
        assert got == expected
        assert (roll.offset, roll.last, roll.year) == (one.offset, one.last, one.year)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(3 * 3600, 11 * 3600), min_size=200, max_size=400), st.sampled_from(["time", "md"]),
       st.booleans())
def test_a_column_across_many_midnights_is_the_stamp_by_stamp_form(gaps: list[int], mode: str, packed: bool) -> None:
    """More steps back in one column than the stretches taken in numpy (a day a few stamps apart):
    the rest goes stamp by stamp, to the same doubles and the same state."""
    from array import array

    span = 86400 if mode == "time" else 365 * 86400
    scale = 1 if mode == "time" else 365
    day = float(timegm((2025, 3, 4, 0, 0, 0)))
    ts = [day + ((sum(gaps[:i]) * scale) % span) + 0.25 for i in range(len(gaps) + 1)]
    one = Rollover(mode, 2025)
    expected = [one.fix(t) for t in ts]
    roll = Rollover(mode, 2025)
    got = list(roll.fix_all(array("d", ts) if packed else ts))  # type: ignore[arg-type]
    assert got == expected
    assert (roll.offset, roll.last, roll.year) == (one.offset, one.last, one.year)
    assert one.offset >= 16 * span  # (more steps than the stretches)
