"""``replay`` plays logs in the order their servers wrote them, not the order they were named in."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.sources.replay import first_time, line_time, time_ordered
from tests.support.logtext import campaign


@given(st.lists(st.one_of(st.none(), st.integers(0, 50)), max_size=12))
@settings(max_examples=300, deadline=None)
def test_stamped_logs_are_sorted_among_their_places_and_the_others_keep_theirs(starts: list[int | None]) -> None:
    paths = [f"log{i}" for i in range(len(starts))]
    times = dict(zip(paths, starts, strict=True))
    out = time_ordered(paths, lambda p: times[str(p)])
    assert sorted(out) == sorted(paths)  # nothing lost or repeated
    for i, p in enumerate(paths):
        if times[p] is None:
            assert out[i] == p  # unstamped files keep their slot
    stamped = [p for p in out if times[str(p)] is not None]
    keys = [(times[str(p)], paths.index(str(p))) for p in stamped]
    assert keys == sorted(keys)  # by time, ties in argument order


def test_a_glob_order_of_real_files_is_replayed_by_first_timestamp(tmp_path: Path) -> None:
    # What a shell glob gives: 10step before 1step before 2step, though they ran 1, 2, 10.
    runs = {"sim_10step.log": (10, 2000), "sim_1step.log": (1, 0), "sim_2step.log": (2, 1000)}
    for name, (steps, start) in runs.items():
        (tmp_path / name).write_text("unstamped banner line\n" + "\n".join(campaign(steps, 90.0, 5, start=start)) + "\n")
    (tmp_path / "notes.txt").write_text("no time here\n")
    named = [tmp_path / n for n in ("sim_10step.log", "notes.txt", "sim_1step.log", "sim_2step.log")]
    assert first_time(named[0]) == line_time(campaign(10, 90.0, 5, start=2000)[0], 2026)
    order = [Path(p).name for p in time_ordered(named)]
    assert order == ["sim_1step.log", "notes.txt", "sim_2step.log", "sim_10step.log"]
    assert first_time(tmp_path / "missing.log") is None
