"""Property tests generated from the stats-line grammar (issue 10).

Lines are built from the grammar's parts — outer wrapper × prefix form × rank
tags × separator after the marker × field order × unknown fields × trailing
punctuation × truncation point — and read by both parse paths: the line parser
and the bulk path (templates over a whole file). Both must give the same
records; the values must be the ones written; a field the cut reached is never
reported with a value it did not print; and every shape the line parser reads
whole is read by the bulk path's templates (the fast path), not handed back.
"""

from __future__ import annotations

from calendar import timegm
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest.bulk import piece_records
from specmon.parsing import LineParser, parse_lines
from specmon.records import Decode, Prefill, Unparsed

YEAR = 2026

# (key, record attribute, kind of value) of the fields SGLang prints.
DECODE_FIELDS = (
    ("#running-req", "running_req", "int"),
    ("#token", "tokens", "int"),
    ("token usage", "token_usage", "float"),
    ("accept len", "accept_len", "float"),
    ("accept rate", "accept_rate", "float"),
    ("cuda graph", "graph", "bool"),
    ("gen throughput (token/s)", "gen_throughput", "float"),
    ("#queue-req", "queue_req", "int"),
)
PREFILL_FIELDS = (
    ("#new-seq", "new_seq", "int"),
    ("#new-token", "new_token", "int"),
    ("#cached-token", "cached_token", "int"),
    ("token usage", None, "float"),
    ("#running-req", "running_req", "int"),
    ("#queue-req", "queue_req", "int"),
    ("input throughput (token/s)", "input_throughput", "float"),
)
# Keys a newer release might add, and known keys these records do not keep.
UNKNOWN_KEYS = ("#new-thing", "est. decode TFLOPS/s (per GPU)", "fwd occupancy", "#swa token", "x_y-z")
RANK_NAMES = ("DP", "TP", "EP", "PP", "ATTN_CP", "MOE_DP")


@dataclass
class Written:
    """A generated line and what it says."""

    line: str
    marker: str
    ts: float | None  # epoch seconds, or seconds of the day for a time-only prefix
    time_only: bool
    rank: str | None
    values: dict[str, Any]  # attribute -> value written
    texts: dict[str, str]  # attribute -> value text written
    spans: dict[str, tuple[int, int, int]]  # attribute -> (key start, value start, value end)
    was_cut: bool = False


def _value(draw: st.DrawFn, kind: str) -> tuple[Any, str]:
    if kind == "int":
        v = draw(st.integers(0, 10**6))
        return v, str(v)
    if kind == "bool":
        v = draw(st.booleans())
        return v, str(v)
    v = round(draw(st.floats(0, 5000, allow_nan=False)), 2)
    text = draw(st.sampled_from(("{:.2f}", "{:.1f}", "{:.3f}"))).format(v)
    return float(text), text


@st.composite
def stats_line(draw: st.DrawFn, *, cut: bool = True) -> Written:
    y, mo, d = YEAR, draw(st.integers(1, 12)), draw(st.integers(1, 28))
    h, mi, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    ms = draw(st.integers(0, 999))
    epoch = float(timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    date, hms = f"{y:04d}-{mo:02d}-{d:02d}", f"{h:02d}:{mi:02d}:{s:02d}"
    ranks = " ".join(f"{n}{draw(st.integers(0, 63))}"
                     for n in draw(st.lists(st.sampled_from(RANK_NAMES), max_size=3)))
    prefix_form = draw(st.sampled_from(("date", "date_ms", "date_ms_comma", "time", "time_ms", "none",
                                        "custom", "no_bracket")))
    wrapper = draw(st.sampled_from(("", "docker", "cri", "ray", "ansi_ray", "compose", "vllm_tag")))
    rk = f" {ranks}" if ranks else ""
    ts: float | None = epoch
    time_only = False
    if prefix_form == "date":
        prefix = f"[{date} {hms}{rk}] "
    elif prefix_form == "date_ms":
        prefix, ts = f"[{date} {hms}.{ms:03d}{rk}] ", epoch + ms / 1000
    elif prefix_form == "date_ms_comma":
        prefix, ts = f"[{date} {hms},{ms:03d}{rk}] ", epoch + ms / 1000
    elif prefix_form in ("time", "time_ms"):
        frac = f".{ms:03d}" if prefix_form == "time_ms" else ""
        prefix, time_only = f"[{hms}{frac}{rk}] ", True
        ts = (h * 3600 + mi * 60 + s) + (ms / 1000 if frac else 0.0)
    elif prefix_form == "custom":
        prefix = f"{date} {hms} INFO 8900 [{rk} scheduler_metrics_mixin.py:222] "
    elif prefix_form == "no_bracket":
        prefix = f"{date} {hms}{rk}] "
    else:
        prefix, ts, ranks = "", None, ""
    wrap_epoch = epoch + 7.25
    wd = f"{date}T{(h):02d}:{mi:02d}:{s:02d}.250000000Z"
    if wrapper == "docker":
        outer = f"{wd.replace(f'{s:02d}.25', f'{(s + 7) % 60:02d}.25')} "
    elif wrapper == "cri":
        outer = f"{wd} stdout F "
    elif wrapper == "ray":
        outer = "(WorkerDict pid=1216, ip=10.0.0.7) "
    elif wrapper == "ansi_ray":
        outer = "\x1b[36m(WorkerDict pid=1216, ip=10.0.0.7)\x1b[0m "
    elif wrapper == "compose":
        outer = f"{date} {hms}.250 | "
    elif wrapper == "vllm_tag":
        outer = "(EngineCore_DP0 pid=123) "
    else:
        outer = ""
    if ts is None and wrapper in ("docker", "cri", "compose"):
        # No prefix of its own: the wrapper's time is the line's.
        if wrapper == "docker":
            ts = float(timegm((y, mo, d, h, mi, (s + 7) % 60, 0, 0, 0))) + 0.25
        else:
            ts = epoch + 0.25
    del wrap_epoch
    is_decode = draw(st.booleans())
    marker = "Decode batch" if is_decode else "Prefill batch"
    fields = list(DECODE_FIELDS if is_decode else PREFILL_FIELDS)
    if is_decode and not draw(st.booleans()):
        fields = [f for f in fields if f[0] not in ("accept len", "accept rate")]
    if not is_decode and draw(st.booleans()):
        fields = [f for f in fields if f[0] != "input throughput (token/s)"]
    fields = draw(st.permutations(fields))
    extra = draw(st.lists(st.sampled_from(UNKNOWN_KEYS), max_size=2, unique=True))
    for key in extra:
        fields.insert(draw(st.integers(0, len(fields))), (key, None, draw(st.sampled_from(("int", "float")))))
    sep = draw(st.sampled_from((". ", ", ", ".", ",", " | ", " ")))
    trail = draw(st.sampled_from(("", ", ", ",", " ")))
    line = outer + prefix + marker + sep
    values: dict[str, Any] = {}
    texts: dict[str, str] = {}
    spans: dict[str, tuple[int, int, int]] = {}
    for i, (key, attr, kind) in enumerate(fields):
        v, text = _value(draw, kind)
        if i:
            line += ", "
        k0 = len(line)
        line += f"{key}: "
        v0 = len(line)
        line += text
        if attr is not None:
            values[attr], texts[attr], spans[attr] = v, text, (k0, v0, len(line))
    line += trail
    full = len(line)
    if cut and draw(st.booleans()):
        line = line[: draw(st.integers(len(outer) + len(prefix), len(line)))]
    return Written(line, marker, ts, time_only, ranks or None, values, texts, spans, len(line) < full)


def _check_values(w: Written, rec: Any) -> None:
    """The values of a read line are the written ones; a field the cut reached is not invented."""
    n = len(w.line)
    for attr, (_k0, v0, v1) in w.spans.items():
        got = getattr(rec, attr)
        if n >= v1:
            assert got == w.values[attr], (attr, w.line, rec)
        elif n <= v0:
            assert got is None, (attr, w.line, rec)  # key cut or value absent: not guessed
        else:
            # Cut inside the digits of the last value: the printed part is all there is.
            visible = w.line[v0:]
            assert w.texts[attr].startswith(visible)
            assert got is None or str(got) == visible or float(visible) == got, (attr, w.line, rec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stats_line())
def test_line_parser_reads_what_was_written(w: Written) -> None:
    rec = LineParser(year=YEAR).parse(w.line, 1)
    if w.marker not in w.line:
        return  # cut inside the marker: not a stats line any more
    whole = all(len(w.line) >= sp[2] for sp in w.spans.values())
    if whole:
        expected = Decode if w.marker == "Decode batch" else Prefill
        assert isinstance(rec, expected), (w.line, rec)
    if isinstance(rec, Decode | Prefill):
        _check_values(w, rec)
        if w.time_only:
            assert rec.timestamp is not None and w.ts is not None
            assert abs(rec.timestamp % 86400 - w.ts) < 1e-6, (w.line, rec)
        else:
            assert rec.timestamp == w.ts, (w.line, rec)
        assert rec.rank == w.rank, (w.line, rec)
    elif w.marker == "Decode batch":
        assert isinstance(rec, Unparsed), (w.line, rec)
        # Only a line without a readable gen throughput is unparsed.
        assert len(w.line) < w.spans["gen_throughput"][2]


@st.composite
def log_file(draw: st.DrawFn) -> list[Written]:
    """A few shapes, each repeated with new values, some lines cut, HTTP access lines between."""
    shapes = draw(st.lists(stats_line(cut=False), min_size=1, max_size=3))
    out: list[Written] = []
    for _ in range(draw(st.integers(3, 25))):
        out.append(draw(st.sampled_from(shapes)))
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(stats_line()))
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_file(), st.sampled_from(("", "access")))
def test_both_paths_give_identical_records_and_the_fast_path_reads_every_whole_shape(
        written: list[Written], noise: str) -> None:
    lines: list[str] = []
    for i, w in enumerate(written):
        lines.append(w.line)
        if noise and i % 3 == 0:
            lines.append('[2026-08-23 09:00:00] INFO:     127.0.0.1:3766 - "POST /v1/completions HTTP/1.1" 200 OK')
    by_line = list(parse_lines(lines, year=YEAR))
    by_bulk, by_template = piece_records(("\n".join(lines) + "\n").encode(), year=YEAR)
    assert [r.to_json() for r in by_bulk] == [r.to_json() for r in by_line]
    # Every line not cut was read by a template (a cut line is a one-off: the line parser's).
    whole = sum(1 for w in written if not w.was_cut)
    assert by_template >= whole, (by_template, whole, [w.line for w in written])
