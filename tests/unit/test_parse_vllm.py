"""vLLM periodic engine stats and speculative-decoding metrics, checked against real lines.

Every ``Avg prompt throughput`` and ``SpecDecoding metrics`` / ``Speculative metrics``
line of every real vLLM excerpt (V0, early V1, current V1, the CPU kit's own runs in
``vllm_cpu_kit/``) is listed with the values read from the file. Percentages stay
percentages in EngineStats (as printed) and become fractions in Spec
(``draft_acceptance_rate``: "32.6%" -> 0.326, V0 "0.000" -> 0.0).

vLLM prints ``MM-DD HH:MM:SS`` without a year; these tests parse with ``year=2025``.
Process tags such as ``(APIServer pid=1)`` are not ranks: rank is None throughout.

Lines marked SYNTHETIC were written here from FORMATS.md §2.2-2.3 (real excerpts
showing them are kept back or do not exist in the corpus).
"""

from __future__ import annotations

from calendar import timegm
from functools import cache
from typing import Any

import pytest

from specmon.parsing import LineParser, parse_lines
from specmon.records import EngineStats, Spec, Unparsed
from tests.support.realdata import read_lines

YEAR = 2025


def ts(text: str) -> float:
    """``YYYY-MM-DD HH:MM:SS[.fff]`` read as UTC, in epoch seconds."""
    date, _, clock = text.partition(" ")
    hms, _, frac = clock.partition(".")
    y, mo, d = (int(x) for x in date.split("-"))
    h, mi, s = (int(x) for x in hms.split(":"))
    return timegm((y, mo, d, h, mi, s, 0, 0, 0)) + (int(frac) / 10 ** len(frac) if frac else 0.0)


def vllm_ts(month_day_time: str, year: int = YEAR) -> float:
    """vLLM's ``MM-DD HH:MM:SS`` in the given year."""
    return ts(f"{year}-{month_day_time}")


@cache
def file_records(name: str) -> dict[int, list[Any]]:
    """All records of a whole file, parsed in order with year=2025, by line number."""
    out: dict[int, list[Any]] = {}
    for rec in parse_lines(read_lines(name), year=YEAR):
        out.setdefault(rec.line, []).append(rec)
    return out


def record_at(name: str, lineno: int, cls: type) -> Any:
    """The single record of type ``cls`` the parser produced for ``name:lineno``."""
    recs = file_records(name).get(lineno, [])
    matching = [r for r in recs if type(r) is cls]
    assert len(matching) == 1, f"{name}:{lineno}: expected one {cls.__name__}, got {recs!r}"
    return matching[0]


def assert_fields(rec: Any, expected: dict[str, Any]) -> None:
    """Every expected field equal (floats to 1e-9), None meaning None."""
    for key, want in expected.items():
        got = getattr(rec, key)
        if want is None or isinstance(want, bool):
            assert got is want, f"{key}: expected {want!r}, got {got!r} in {rec!r}"
        elif isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{key}: expected {want!r}, got {got!r}"
        elif isinstance(want, tuple):
            assert isinstance(got, tuple), f"{key}: expected a tuple, got {got!r}"
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{key}: expected {want!r}, got {got!r}"
        else:
            assert got == want and type(got) is type(want), f"{key}: expected {want!r}, got {got!r}"


def E(**kw: Any) -> dict[str, Any]:
    """A full EngineStats expectation: every field not given must be None."""
    base = dict.fromkeys(
        ("prompt_throughput", "gen_throughput", "running", "waiting", "kv_cache_usage",
         "prefix_cache_hit_rate", "engine_index", "engines_aggregated")
    )
    base.update(kw)
    return base


def S(**kw: Any) -> dict[str, Any]:
    """A full Spec expectation: every field not given must be None."""
    base = dict.fromkeys(
        ("mean_acceptance_length", "accepted", "drafted", "draft_acceptance_rate", "per_position",
         "accepted_throughput", "drafted_throughput")
    )
    base.update(kw)
    return base


# (file, line, "MM-DD HH:MM:SS" or None, fields). V0 "Pending" is the waiting count;
# V0 and the CPU build's KV usage ("GPU"/"CPU KV cache usage") is kv_cache_usage.
REAL_ENGINE = [
    ("vllm_v0_engine_stats_0_5_4.log", 1, "08-20 02:39:37", E(prompt_throughput=871.4, gen_throughput=88.1, running=1, waiting=0, kv_cache_usage=0.2)),
    ("vllm_v0_engine_stats_0_5_4.log", 2, "08-20 02:39:42", E(prompt_throughput=883.5, gen_throughput=85.3, running=2, waiting=0, kv_cache_usage=0.4)),
    ("vllm_v0_engine_stats_0_5_4.log", 3, "08-20 02:40:09", E(prompt_throughput=1134.2, gen_throughput=117.6, running=2, waiting=0, kv_cache_usage=0.5)),
    ("vllm_v0_engine_stats_0_5_4.log", 4, "08-20 02:40:29", E(prompt_throughput=1181.6, gen_throughput=114.5, running=2, waiting=0, kv_cache_usage=0.4)),
    ("vllm_v0_engine_stats_0_5_4.log", 5, "08-20 02:40:34", E(prompt_throughput=1175.3, gen_throughput=116.4, running=2, waiting=0, kv_cache_usage=0.4)),
    ("vllm_v0_medusa_tokens_tokens_typo_1.log", 1, "07-24 04:00:31", E(prompt_throughput=558.7, gen_throughput=127.4, running=2, waiting=0, kv_cache_usage=0.8)),
    ("vllm_v0_medusa_tokens_tokens_typo_1.log", 6, "07-24 04:00:36", E(prompt_throughput=278.5, gen_throughput=110.4, running=2, waiting=0, kv_cache_usage=0.3)),
    ("vllm_v1_dflash_access_interleaved_1.log", 2, "05-07 04:56:17", E(prompt_throughput=2.5, gen_throughput=123.8, running=1, waiting=0, kv_cache_usage=17.5, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_dflash_access_interleaved_1.log", 5, "05-07 04:56:27", E(prompt_throughput=2.5, gen_throughput=124.5, running=1, waiting=0, kv_cache_usage=18.9, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_mtp_waiting_1.log", 2, "05-19 10:30:43", E(prompt_throughput=3279.0, gen_throughput=1004.4, running=8, waiting=7, kv_cache_usage=82.5, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_mtp_waiting_1.log", 4, "05-19 10:30:53", E(prompt_throughput=3278.9, gen_throughput=1024.8, running=9, waiting=6, kv_cache_usage=97.7, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_spec_full_accept_loop_1.log", 1, "05-02 20:46:59", E(prompt_throughput=0.0, gen_throughput=35.2, running=1, waiting=0, kv_cache_usage=56.1, prefix_cache_hit_rate=76.5, engine_index=0)),
    ("vllm_v1_spec_full_accept_loop_1.log", 3, "05-02 20:47:09", E(prompt_throughput=0.0, gen_throughput=34.8, running=1, waiting=0, kv_cache_usage=56.1, prefix_cache_hit_rate=76.5, engine_index=0)),
    ("vllm_v1_spec_full_accept_loop_1.log", 5, "05-02 20:47:19", E(prompt_throughput=0.0, gen_throughput=35.2, running=1, waiting=0, kv_cache_usage=56.1, prefix_cache_hit_rate=76.5, engine_index=0)),
    ("vllm_v1_spec_mm_cache_1.log", 1, "05-08 16:21:55", E(prompt_throughput=0.0, gen_throughput=28.4, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_spec_mm_cache_1.log", 3, "05-08 16:22:00", E(prompt_throughput=0.0, gen_throughput=0.0, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_v1_specdecode_early_2025_04.log", 3, None, E(prompt_throughput=1.1, gen_throughput=10.0, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 400, "11-29 07:48:04", E(prompt_throughput=969.0, gen_throughput=2175.5, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 723, "11-29 07:48:14", E(prompt_throughput=1148.5, gen_throughput=2583.7, running=4, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 1052, "11-29 07:48:24", E(prompt_throughput=1130.5, gen_throughput=2618.6, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 1423, "11-29 07:48:34", E(prompt_throughput=1305.8, gen_throughput=2983.0, running=4, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 1714, "11-29 07:48:44", E(prompt_throughput=1010.6, gen_throughput=2297.6, running=3, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 2095, "11-29 07:48:54", E(prompt_throughput=1326.6, gen_throughput=3116.2, running=3, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 2462, "11-29 07:49:04", E(prompt_throughput=1314.0, gen_throughput=2947.2, running=4, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 2471, "11-29 07:49:14", E(prompt_throughput=8.1, gen_throughput=53.1, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3.log", 2473, "11-29 07:49:24", E(prompt_throughput=0.0, gen_throughput=0.0, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 407, "11-29 07:56:48", E(prompt_throughput=1005.8, gen_throughput=2238.5, running=4, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 755, "11-29 07:56:58", E(prompt_throughput=1199.7, gen_throughput=2704.7, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 768, "11-29 07:57:08", E(prompt_throughput=33.6, gen_throughput=73.0, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 370, "11-29 07:54:30", E(prompt_throughput=889.3, gen_throughput=2004.1, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 630, "11-29 07:54:40", E(prompt_throughput=917.5, gen_throughput=2041.7, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 849, "11-29 07:54:50", E(prompt_throughput=752.7, gen_throughput=1767.1, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 1099, "11-29 07:55:00", E(prompt_throughput=884.8, gen_throughput=2065.8, running=2, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 1396, "11-29 07:55:10", E(prompt_throughput=1030.6, gen_throughput=2411.5, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 1717, "11-29 07:55:20", E(prompt_throughput=1132.0, gen_throughput=2469.4, running=1, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 2048, "11-29 07:55:30", E(prompt_throughput=1150.7, gen_throughput=2714.7, running=2, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 2060, "11-29 07:55:40", E(prompt_throughput=32.4, gen_throughput=76.7, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
    ("vllm_cpu_kit/nospec.log", 2061, "11-29 07:55:50", E(prompt_throughput=0.0, gen_throughput=0.0, running=0, waiting=0, kv_cache_usage=0.0, prefix_cache_hit_rate=0.0, engine_index=0)),
]

# Current V1 lines: "Avg Draft acceptance rate" as a fraction; early/dev formats print
# "Draft acceptance rate" first; V0 prints a fraction already and has the
# "Number of draft tokens tokens" typo (vLLM 0.5.1-0.5.3).
REAL_SPEC = [
    ("vllm_v0_medusa_tokens_tokens_typo_1.log", 2, "07-24 04:00:31", S(accepted=0, drafted=42272, draft_acceptance_rate=0.0)),
    ("vllm_v0_medusa_tokens_tokens_typo_1.log", 7, "07-24 04:00:36", S(accepted=0, drafted=51056, draft_acceptance_rate=0.0)),
    ("vllm_v1_dflash_15pos_2026_1.log", 1, "05-01 14:24:50", S(mean_acceptance_length=2.37, accepted=89, drafted=975, draft_acceptance_rate=0.091, per_position=(0.6, 0.385, 0.215, 0.108, 0.062, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), accepted_throughput=8.9, drafted_throughput=97.5)),
    ("vllm_v1_dflash_access_interleaved_1.log", 3, "05-07 04:56:17", S(mean_acceptance_length=2.63, accepted=768, drafted=2355, draft_acceptance_rate=0.326, per_position=(0.726, 0.467, 0.24, 0.134, 0.064), accepted_throughput=76.8, drafted_throughput=235.49)),
    ("vllm_v1_dflash_access_interleaved_1.log", 6, "05-07 04:56:27", S(mean_acceptance_length=2.66, accepted=777, drafted=2345, draft_acceptance_rate=0.331, per_position=(0.733, 0.458, 0.254, 0.141, 0.07), accepted_throughput=77.69, drafted_throughput=234.48)),
    ("vllm_v1_mtp_waiting_1.log", 1, "05-19 10:30:33", S(mean_acceptance_length=2.53, accepted=5533, drafted=7214, draft_acceptance_rate=0.767, per_position=(0.832, 0.702), accepted_throughput=553.18, drafted_throughput=721.24)),
    ("vllm_v1_mtp_waiting_1.log", 3, "05-19 10:30:43", S(mean_acceptance_length=2.77, accepted=6418, drafted=7254, draft_acceptance_rate=0.885, per_position=(0.929, 0.84), accepted_throughput=641.77, drafted_throughput=725.37)),
    ("vllm_v1_spec_full_accept_loop_1.log", 2, "05-02 20:46:59", S(mean_acceptance_length=4.0, accepted=264, drafted=264, draft_acceptance_rate=1.0, per_position=(1.0, 1.0, 1.0), accepted_throughput=26.4, drafted_throughput=26.4)),
    ("vllm_v1_spec_full_accept_loop_1.log", 4, "05-02 20:47:09", S(mean_acceptance_length=4.0, accepted=261, drafted=261, draft_acceptance_rate=1.0, per_position=(1.0, 1.0, 1.0), accepted_throughput=26.1, drafted_throughput=26.1)),
    ("vllm_v1_spec_mm_cache_1.log", 2, "05-08 16:21:55", S(mean_acceptance_length=2.2, accepted=78, drafted=195, draft_acceptance_rate=0.4, per_position=(0.615, 0.415, 0.169), accepted_throughput=15.6, drafted_throughput=38.99)),
    ("vllm_v1_specdecode_early_2025_04.log", 1, None, S(accepted=66, drafted=66, draft_acceptance_rate=1.0)),
    ("vllm_v1_specdecode_early_2025_04.log", 2, None, S(accepted=66, drafted=66, draft_acceptance_rate=1.0)),
    ("vllm_v1_specdecode_pr_dev_format_1.log", 1, "09-09 11:51:35", S(mean_acceptance_length=5.44, accepted=262, drafted=295, draft_acceptance_rate=0.888, per_position=(0.983, 0.949, 0.915, 0.881, 0.712), accepted_throughput=4.37, drafted_throughput=4.92)),
    ("vllm_cpu_kit/ngram_k3.log", 401, "11-29 07:48:04", S(mean_acceptance_length=3.65, accepted=12194, drafted=13464, draft_acceptance_rate=0.906, per_position=(0.96, 0.898, 0.795), accepted_throughput=1151.34, drafted_throughput=1271.25)),
    ("vllm_cpu_kit/ngram_k3.log", 724, "11-29 07:48:14", S(mean_acceptance_length=3.65, accepted=13906, drafted=15407, draft_acceptance_rate=0.903, per_position=(0.959, 0.89, 0.797), accepted_throughput=1390.45, drafted_throughput=1540.53)),
    ("vllm_cpu_kit/ngram_k3.log", 1053, "11-29 07:48:24", S(mean_acceptance_length=3.67, accepted=14168, drafted=15553, draft_acceptance_rate=0.911, per_position=(0.96, 0.906, 0.805), accepted_throughput=1416.69, drafted_throughput=1555.18)),
    ("vllm_cpu_kit/ngram_k3.log", 1424, "11-29 07:48:34", S(mean_acceptance_length=3.72, accepted=16846, drafted=18139, draft_acceptance_rate=0.929, per_position=(0.972, 0.921, 0.83), accepted_throughput=1684.53, drafted_throughput=1813.82)),
    ("vllm_cpu_kit/ngram_k3.log", 1715, "11-29 07:48:44", S(mean_acceptance_length=3.72, accepted=12572, drafted=13566, draft_acceptance_rate=0.927, per_position=(0.972, 0.919, 0.829), accepted_throughput=1257.13, drafted_throughput=1356.52)),
    ("vllm_cpu_kit/ngram_k3.log", 2096, "11-29 07:48:54", S(mean_acceptance_length=3.68, accepted=17001, drafted=18628, draft_acceptance_rate=0.913, per_position=(0.961, 0.905, 0.81), accepted_throughput=1700.03, drafted_throughput=1862.72)),
    ("vllm_cpu_kit/ngram_k3.log", 2463, "11-29 07:49:04", S(mean_acceptance_length=3.68, accepted=16324, drafted=17886, draft_acceptance_rate=0.913, per_position=(0.961, 0.906, 0.811), accepted_throughput=1632.31, drafted_throughput=1788.5)),
    ("vllm_cpu_kit/ngram_k3.log", 2472, "11-29 07:49:14", S(mean_acceptance_length=3.7, accepted=330, drafted=361, draft_acceptance_rate=0.914, per_position=(0.943, 0.918, 0.844), accepted_throughput=33.0, drafted_throughput=36.1)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 408, "11-29 07:56:48", S(mean_acceptance_length=3.65, accepted=12565, drafted=13888, draft_acceptance_rate=0.905, per_position=(0.958, 0.895, 0.795), accepted_throughput=1183.89, drafted_throughput=1308.54)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 756, "11-29 07:56:58", S(mean_acceptance_length=3.65, accepted=14446, drafted=15980, draft_acceptance_rate=0.904, per_position=(0.96, 0.893, 0.796), accepted_throughput=1444.65, drafted_throughput=1598.06)),
    ("vllm_cpu_kit/ngram_k3_restart.log", 769, "11-29 07:57:08", S(mean_acceptance_length=3.69, accepted=404, drafted=438, draft_acceptance_rate=0.922, per_position=(0.953, 0.927, 0.813), accepted_throughput=40.4, drafted_throughput=43.8)),
]


def _ids(rows: list[tuple[Any, ...]]) -> list[str]:
    return [f"{r[0]}:{r[1]}" for r in rows]


@pytest.mark.parametrize(("name", "lineno", "when", "fields"), REAL_ENGINE, ids=_ids(REAL_ENGINE))
def test_real_engine_stats_line(name: str, lineno: int, when: str | None, fields: dict[str, Any]) -> None:
    """Each real engine-stats line gives exactly its printed values and time, no rank."""
    rec = record_at(name, lineno, EngineStats)
    assert rec.line == lineno
    assert_fields(rec, fields)
    assert rec.rank is None
    assert rec.timestamp == (None if when is None else vllm_ts(when))


@pytest.mark.parametrize(("name", "lineno", "when", "fields"), REAL_SPEC, ids=_ids(REAL_SPEC))
def test_real_spec_line(name: str, lineno: int, when: str | None, fields: dict[str, Any]) -> None:
    """Each real spec-metrics line gives exactly its printed values and time, no rank."""
    rec = record_at(name, lineno, Spec)
    assert rec.line == lineno
    assert_fields(rec, fields)
    assert rec.rank is None
    assert rec.timestamp == (None if when is None else vllm_ts(when))


@pytest.mark.parametrize(("name", "lineno"), [(r[0], r[1]) for r in REAL_ENGINE + REAL_SPEC],
                         ids=_ids(REAL_ENGINE + REAL_SPEC))
def test_single_line_needs_no_context(name: str, lineno: int) -> None:
    """A stats line parsed alone by a fresh parser gives the same record as in its file."""
    text = read_lines(name)[lineno - 1]
    alone = LineParser(year=YEAR).parse(text, lineno)
    in_file = [r for r in file_records(name)[lineno] if type(r) in (EngineStats, Spec)]
    assert in_file == [alone]


def test_year_argument_sets_the_year() -> None:
    """The same vLLM line in two years: only the year part of the timestamp moves."""
    text = read_lines("vllm_v1_mtp_waiting_1.log")[1]
    a = LineParser(year=2025).parse(text, 2)
    b = LineParser(year=2026).parse(text, 2)
    assert isinstance(a, EngineStats) and isinstance(b, EngineStats)
    assert a.timestamp == vllm_ts("05-19 10:30:43", 2025)
    assert b.timestamp == vllm_ts("05-19 10:30:43", 2026)


def test_parse_lines_year_default_still_reads_values() -> None:
    """Without a year the values are unchanged (only the timestamp's year is a default)."""
    recs = [r for r in parse_lines(read_lines("vllm_v1_spec_mm_cache_1.log")) if isinstance(r, Spec)]
    assert len(recs) == 1
    assert recs[0].mean_acceptance_length == 2.2
    assert recs[0].timestamp is not None
    assert recs[0].timestamp % 86400 == pytest.approx(16 * 3600 + 21 * 60 + 55)


def test_external_prefix_hit_rate_is_not_the_prefix_hit_rate() -> None:
    """SYNTHETIC (§2.2, 2025-10): "External prefix cache hit rate" must not overwrite the local one."""
    text = ("(APIServer pid=1) INFO 10-24 12:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
            "Avg generation throughput: 50.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
            "Prefix cache hit rate: 20.0%, External prefix cache hit rate: 80.0%, MM cache hit rate: 55.0%")
    rec = LineParser(year=YEAR).parse(text, 9)
    assert isinstance(rec, EngineStats)
    assert_fields(rec, E(prompt_throughput=5.0, gen_throughput=50.0, running=2, waiting=0, kv_cache_usage=5.0,
                         prefix_cache_hit_rate=20.0, engine_index=0))
    assert rec.timestamp == vllm_ts("10-24 12:00:00")


SYNTHETIC_ENGINE = [
    # §2.2 "N Engines Aggregated:" (#24354, 2025-10): no engine index, N engines.
    ("aggregated", "(APIServer pid=1) INFO 10-14 12:00:00 [loggers.py:271] 4 Engines Aggregated: Avg prompt throughput: 10.0 tokens/s, "
                   "Avg generation throughput: 400.0 tokens/s, Running: 12 reqs, Waiting: 3 reqs, GPU KV cache usage: 40.5%, "
                   "Prefix cache hit rate: 12.5%",
     E(prompt_throughput=10.0, gen_throughput=400.0, running=12, waiting=3, kv_cache_usage=40.5,
       prefix_cache_hit_rate=12.5, engines_aggregated=4)),
    # §2.2 data parallel: one engine's line alone.
    ("engine-003", "(APIServer pid=1) INFO 10-14 12:00:00 [loggers.py:271] Engine 003: Avg prompt throughput: 0.0 tokens/s, "
                   "Avg generation throughput: 99.9 tokens/s, Running: 7 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.0%, "
                   "Prefix cache hit rate: 0.0%",
     E(prompt_throughput=0.0, gen_throughput=99.9, running=7, waiting=0, kv_cache_usage=12.0,
       prefix_cache_hit_rate=0.0, engine_index=3)),
    # §2.2 2025-11/2026 optional fields between Waiting and the KV usage.
    ("preempt-deferred", "(APIServer pid=1) INFO 04-02 12:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 1.5 tokens/s, "
                         "Avg generation throughput: 30.2 tokens/s, Running: 16 reqs, Waiting: 9 reqs, Deferred: 2 reqs, "
                         "Preemptions: 4, GPU KV cache usage: 99.1%, Prefix cache hit rate: 3.3%, Corrupted: 0 reqs",
     E(prompt_throughput=1.5, gen_throughput=30.2, running=16, waiting=9, kv_cache_usage=99.1,
       prefix_cache_hit_rate=3.3, engine_index=0)),
    # §2.2 first V1 shape (2025-01, #12478): no engine prefix, trailing space.
    ("v1-2025-01", "INFO 01-30 12:00:00 loggers.py:72] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
                   "Running: 1 reqs, Waiting: 0 reqs ",
     E(prompt_throughput=1.0, gen_throughput=2.0, running=1, waiting=0)),
]


@pytest.mark.parametrize(("name", "text", "fields"), SYNTHETIC_ENGINE, ids=[r[0] for r in SYNTHETIC_ENGINE])
def test_synthetic_engine_stats(name: str, text: str, fields: dict[str, Any]) -> None:
    """SYNTHETIC: documented engine-line variants, each field exact, absent ones None."""
    rec = LineParser(year=YEAR).parse(text, 11)
    assert isinstance(rec, EngineStats), rec
    assert rec.line == 11
    assert_fields(rec, fields)
    assert rec.rank is None
    assert rec.timestamp is not None


def test_docker_stamp_loses_to_the_engine_time() -> None:
    """SYNTHETIC §0 ``docker logs -t``: the vLLM time (one second earlier) is the record's time."""
    line = read_lines("vllm_v1_dflash_access_interleaved_1.log")[1]
    rec = LineParser(year=2026).parse("2026-05-07T04:56:18.123456789Z " + line, 2)
    assert isinstance(rec, EngineStats)
    assert rec.timestamp == vllm_ts("05-07 04:56:17", 2026)
    assert rec.gen_throughput == 123.8
    assert rec.rank is None


SYNTHETIC_SPEC = [
    # §2.3 V0 without the typo (after vLLM #6470).
    ("v0-fixed", "INFO 09-10 10:00:00 metrics.py:406] Speculative metrics: Draft acceptance rate: 0.620, System efficiency: 0.455, "
                 "Number of speculative tokens: 4, Number of accepted tokens: 1240, Number of draft tokens: 2000, "
                 "Number of emitted tokens: 1820.",
     S(accepted=1240, drafted=2000, draft_acceptance_rate=0.62)),
    # §2.3 current format with nothing drafted: nan is not a number to report.
    ("nan-rates", "(APIServer pid=1) INFO 05-07 05:00:00 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: nan, "
                  "Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
                  "Per-position acceptance rate: nan, nan, nan, Avg Draft acceptance rate: nan%",
     S(accepted=0, drafted=0, accepted_throughput=0.0, drafted_throughput=0.0)),
    # §2.3 0.8.5-0.10.1 format: rate first, mean length, per-position last.
    ("v0-8-5", "INFO 05-01 10:00:00 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 62.5%, Mean acceptance length: 2.88, "
               "Accepted: 750 tokens, Drafted: 1200 tokens, Per-position acceptance rate: 0.800, 0.625, 0.450",
     S(mean_acceptance_length=2.88, accepted=750, drafted=1200, draft_acceptance_rate=0.625, per_position=(0.8, 0.625, 0.45))),
]


@pytest.mark.parametrize(("name", "text", "fields"), SYNTHETIC_SPEC, ids=[r[0] for r in SYNTHETIC_SPEC])
def test_synthetic_spec(name: str, text: str, fields: dict[str, Any]) -> None:
    """SYNTHETIC: documented spec-line variants, each field exact, absent/NaN ones None."""
    rec = LineParser(year=YEAR).parse(text, 12)
    assert isinstance(rec, Spec), rec
    assert rec.line == 12
    assert_fields(rec, fields)


DFLASH_SPEC = read_lines("vllm_v1_dflash_access_interleaved_1.log")[2]
DFLASH_ENGINE = read_lines("vllm_v1_dflash_access_interleaved_1.log")[1]


def test_spec_cut_after_required_values_keeps_them() -> None:
    """A spec line cut inside the per-position list still has its mean length and counts."""
    cut = DFLASH_SPEC[: DFLASH_SPEC.index("0.467") + 3]
    rec = LineParser(year=YEAR).parse(cut, 3)
    assert isinstance(rec, Spec), rec
    assert rec.mean_acceptance_length == 2.63
    assert rec.accepted == 768
    assert rec.drafted == 2355
    # The printed Avg rate was cut off: None, or exactly accepted/drafted (its definition).
    assert rec.draft_acceptance_rate is None or rec.draft_acceptance_rate == pytest.approx(768 / 2355)


@pytest.mark.parametrize(
    "text",
    [
        DFLASH_SPEC[: DFLASH_SPEC.index("Mean acceptance length") + len("Mean acce")],
        DFLASH_SPEC[: DFLASH_SPEC.index("SpecDecoding metrics") + len("SpecDecoding metrics")],
        DFLASH_SPEC.replace("2.63", "2.x3").split(", Accepted throughput")[0],
    ],
    ids=["cut-in-mean", "marker-only", "garbage-mean"],
)
def test_spec_without_required_values_is_unparsed(text: str) -> None:
    """No readable mean length and no accepted/drafted counts -> Unparsed, never None."""
    rec = LineParser(year=YEAR).parse(text, 3)
    assert isinstance(rec, Unparsed), rec
    assert rec.marker and rec.marker in text
    assert rec.line == 3
    assert rec.timestamp == vllm_ts("05-07 04:56:17")


@pytest.mark.parametrize(
    "text",
    [
        DFLASH_ENGINE[: DFLASH_ENGINE.index("Avg generation") + len("Avg gener")],
        DFLASH_ENGINE.replace("123.8 tokens/s", "12x.8 tokens/s"),
    ],
    ids=["cut-before-gen", "garbage-gen"],
)
def test_engine_line_without_gen_throughput_is_unparsed(text: str) -> None:
    """An engine line whose generation throughput cannot be read is kept as Unparsed."""
    rec = LineParser(year=YEAR).parse(text, 2)
    assert isinstance(rec, Unparsed), rec
    assert rec.marker and rec.marker in text


def test_engine_line_cut_after_counts_keeps_them() -> None:
    """Cut after ``Waiting: 0 reqs``: throughputs and counts are kept, KV usage is None."""
    cut = DFLASH_ENGINE[: DFLASH_ENGINE.index("Waiting: 0 reqs") + len("Waiting: 0 reqs")]
    rec = LineParser(year=YEAR).parse(cut, 2)
    assert isinstance(rec, EngineStats), rec
    assert_fields(rec, E(prompt_throughput=2.5, gen_throughput=123.8, running=1, waiting=0, engine_index=0))


def test_scheduler_dump_is_not_spec_metrics() -> None:
    """``scheduled_spec_decode_tokens`` in a crash dump is not a metrics line."""
    recs = file_records("vllm_v1_spec_dump_fatal_0_9_1.log").get(1, [])
    assert not [r for r in recs if isinstance(r, (Spec, EngineStats, Unparsed))]


def test_access_lines_are_not_records() -> None:
    """``(APIServer pid=1) INFO:     ip - "POST ..." 200 OK`` lines give nothing."""
    recs = file_records("vllm_v1_dflash_access_interleaved_1.log")
    assert 1 not in recs and 4 not in recs
    typo = file_records("vllm_v0_medusa_tokens_tokens_typo_1.log")
    for n in (3, 4, 5, 8, 9, 10):
        assert n not in typo


def test_cpu_kit_runs_have_one_spec_line_per_engine_line_while_loaded() -> None:
    """The CPU kit's n-gram run: each SpecDecoding line follows its Engine line; nospec has none."""
    k3 = file_records("vllm_cpu_kit/ngram_k3.log")
    engine_lines = sorted(n for n, rs in k3.items() if any(isinstance(r, EngineStats) for r in rs))
    spec_lines = sorted(n for n, rs in k3.items() if any(isinstance(r, Spec) for r in rs))
    assert len(engine_lines) == 9 and len(spec_lines) == 8
    assert spec_lines == [n + 1 for n in engine_lines[:-1]]
    nospec = file_records("vllm_cpu_kit/nospec.log")
    assert not [r for rs in nospec.values() for r in rs if isinstance(r, Spec)]
