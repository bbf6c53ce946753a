"""SGLang's launch arguments in both printed forms, and the ``<device> graph`` decode field.

SGLang 0.5.x prints ``server_args={'model_path': ..., ...}`` (a Python dict); earlier
releases printed ``server_args=ServerArgs(model_path=..., ...)``. Both are read with
Python's literal parser. The named cases are the real kit's logs (SGLang 0.5.23,
``tests/data/real_logs/sglang_cpu_kit/``); generated variations cover key order, extra
keys, None values, quoting, nested values and cut lines, on both parse paths.
"""

from __future__ import annotations

import json
import keyword
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest.bulk import piece_records
from specmon.model.session import RunConfig
from specmon.parsing import LineParser, parse_lines
from specmon.records import Config, Decode, Engine, Unparsed
from tests.support.realdata import DATA, read_lines

SAMPLES = Path(__file__).resolve().parents[2] / "sample_logs" / "real"

KIT = "sglang_cpu_kit/"


def _config_of(name: str) -> Config:
    cfgs = [r for r in parse_lines(read_lines(KIT + name), year=2026) if isinstance(r, Config)]
    assert len(cfgs) == 1, cfgs
    return cfgs[0]


def test_real_eagle3_dict_form() -> None:
    cfg = _config_of("eagle3_k3.log")
    assert cfg.engine is Engine.SGLANG
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens) == ("EAGLE3", 3, 1, 4)
    assert cfg.model == "/tmp/sglangmodel"
    assert cfg.extra["speculative_draft_model_path"] == "/tmp/sglangmodel-eagle3"
    assert cfg.extra["speculative_adaptive"] is False
    assert cfg.extra["decode_log_interval"] == 10
    assert cfg.line == 14


def test_real_ngram_dict_form_is_not_a_baseline() -> None:
    """NGRAM prints ``speculative_num_steps: 0``; its depth is the draft tokens after the root."""
    cfg = _config_of("ngram_k3.log")
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens) == ("NGRAM", 3, None, 4)
    rc = RunConfig.from_record(cfg)
    assert not rc.is_nospec
    assert rc.label == "NGRAM 3 tokens"


def test_real_nospec_dict_form() -> None:
    cfg = _config_of("nospec.log")
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens) == (None, 0, None, None)
    assert RunConfig.from_record(cfg).label == "no speculation"


def test_real_cpu_graph_decode_line() -> None:
    decodes = [r for r in parse_lines(read_lines(KIT + "eagle3_k3.log"), year=2026) if isinstance(r, Decode)]
    assert len(decodes) == 68
    first = decodes[0]
    assert (first.accept_len, first.accept_rate, first.graph, first.gen_throughput) == (1.75, 0.25, False, 5.33)


def test_traceback_source_line_is_no_configuration() -> None:
    """``server_args=server_args`` in a traceback's source line names no configuration."""
    assert LineParser().parse("    scheduler = Scheduler(server_args=server_args, port_args=port_args)", 1) is None


# -- generated variations -----------------------------------------------------------------------

_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**9), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20))
_VALUE = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3), st.dictionaries(st.text("abc", max_size=3), _SCALAR, max_size=2))
# A dataclass field is an identifier, never a keyword (``ServerArgs(if=1)`` is no Python).
_EXTRA_KEY = st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True).filter(
    lambda k: not k.startswith("speculative_") and k != "model_path" and not keyword.iskeyword(k))
_ALGOS = st.sampled_from(["EAGLE", "EAGLE3", "STANDALONE", "NEXTN", "NGRAM", None])
_PATH = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)


@st.composite
def _args(draw: st.DrawFn) -> dict[str, Any]:
    algo = draw(_ALGOS)
    args: dict[str, Any] = {
        "model_path": draw(_PATH),
        "speculative_algorithm": algo,
        "speculative_num_steps": draw(st.one_of(st.none(), st.integers(0, 16))),
        "speculative_eagle_topk": draw(st.one_of(st.none(), st.integers(1, 10))),
        "speculative_num_draft_tokens": draw(st.one_of(st.none(), st.integers(1, 64))),
        "speculative_draft_model_path": draw(st.one_of(st.none(), _PATH)),
        "speculative_adaptive": draw(st.booleans()),
        "speculative_adaptive_config": draw(st.one_of(st.none(), _PATH)),
    }
    for k, v in draw(st.dictionaries(_EXTRA_KEY, _VALUE, max_size=12)).items():
        args.setdefault(k, v)
    items = list(args.items())
    random.Random(draw(st.integers(0, 2**32))).shuffle(items)  # any key order
    return dict(items)


def _expect(args: dict[str, Any]) -> tuple[str | None, int | None, int | None, int | None]:
    algo = args["speculative_algorithm"]
    dt = args["speculative_num_draft_tokens"]
    if algo is None:
        return None, 0, None, None
    if algo == "NGRAM":
        return algo, (dt - 1 if dt is not None and dt > 1 else None), None, dt
    return algo, args["speculative_num_steps"], args["speculative_eagle_topk"], dt


def _dict_line(args: dict[str, Any]) -> str:
    return "[2026-12-04 15:34:28] server_args=" + repr(args)


def _call_line(args: dict[str, Any]) -> str:
    return "[2026-12-04 15:34:28] server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


@settings(max_examples=150, deadline=None)
@given(_args(), st.booleans())
def test_both_forms_read_every_speculative_field(args: dict[str, Any], call_form: bool) -> None:
    text = _call_line(args) if call_form else _dict_line(args)
    cfg = LineParser().parse(text, 1)
    assert isinstance(cfg, Config), (cfg, text[:200])
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens) == _expect(args)
    assert cfg.model == args["model_path"]
    assert cfg.extra["speculative_draft_model_path"] == args["speculative_draft_model_path"]
    assert cfg.extra["speculative_adaptive"] is args["speculative_adaptive"]
    assert cfg.extra["speculative_adaptive_config"] == args["speculative_adaptive_config"]


@settings(max_examples=60, deadline=None)
@given(_args(), st.booleans(), st.lists(st.tuples(st.floats(0.1, 900.0), st.floats(1.0, 4.0)), min_size=1, max_size=5))
def test_line_and_bulk_paths_agree(args: dict[str, Any], call_form: bool, rows: list[tuple[float, float]]) -> None:
    lines = [_call_line(args) if call_form else _dict_line(args)]
    for i, (tps, al) in enumerate(rows):
        lines.append(f"[2026-12-04 15:35:{i:02d}] Decode batch, #running-req: 4, #token: 217, token usage: 0.03, "
                     f"accept len: {al:.2f}, accept rate: 0.25, cpu graph: False, gen throughput (token/s): "
                     f"{tps:.2f}, #queue-req: 0")
    line = [r.to_json() for r in parse_lines(lines, year=2026)]
    bulk, _ = piece_records("\n".join(lines).encode(), year=2026)
    assert [r.to_json() for r in bulk] == line
    assert line[0]["kind"] == "config"


@settings(max_examples=100, deadline=None)
@given(_args(), st.floats(0.0, 1.0))
def test_a_cut_dict_never_invents_a_value(args: dict[str, Any], frac: float) -> None:
    """A line cut anywhere: a Config whose every value read is the printed one, or Unparsed."""
    text = _dict_line(args)
    cut_at = text.index("{") + 1 + int(frac * (len(text) - text.index("{") - 1))
    rec = LineParser().parse(text[:cut_at], 1)
    if rec is None or isinstance(rec, Unparsed):
        return
    assert isinstance(rec, Config)
    if rec.model is not None:
        assert rec.model == args["model_path"]
    assert rec.algorithm in (None, args["speculative_algorithm"])
    if rec.algorithm is None and args["speculative_algorithm"] is not None:
        assert rec.steps is None  # cut before the algorithm: not read as "no speculation"
    for k, v in rec.extra.items():
        if k in args and not isinstance(args[k], list | dict):
            assert v == args[k], k


def test_non_literal_values_are_skipped_not_fatal() -> None:
    text = ("[2026-12-04 15:34:28] server_args={'model_path': 'm', 'speculative_algorithm': 'EAGLE3', "
            "'speculative_num_steps': 2, 'lora_backend': <Backend.TRITON: 1>, 'speculative_eagle_topk': 1, "
            "'speculative_num_draft_tokens': 3}")
    cfg = LineParser().parse(text, 1)
    assert isinstance(cfg, Config)
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens, cfg.model) == ("EAGLE3", 2, 1, 3, "m")


def test_a_huge_dict_is_bounded() -> None:
    """A dict far over the literal cap is read key by key, in bounded time."""
    pad = ", ".join(f"'k{i}': {i}" for i in range(60_000))
    text = "server_args={'model_path': 'm', 'speculative_algorithm': None, " + pad + "}"
    cfg = LineParser().parse(text, 1)
    assert isinstance(cfg, Config) and cfg.steps == 0 and cfg.model == "m"


_DEVICE = st.from_regex(r"[a-z][a-z0-9_]{1,11}", fullmatch=True).filter(
    lambda w: w not in ("token", "full", "gpu", "cpu", "swa", "mamba"))


@settings(max_examples=60, deadline=None)
@given(_DEVICE, st.booleans(), st.floats(0.5, 900.0))
def test_any_device_graph_key_is_read_on_both_paths(device: str, on: bool, tps: float) -> None:
    text = (f"[2026-12-04 15:35:21] Decode batch, #running-req: 4, #token: 217, token usage: 0.03, "
            f"accept len: 1.75, accept rate: 0.25, {device} graph: {on}, gen throughput (token/s): {tps:.2f}, "
            "#queue-req: 0")
    rec = LineParser().parse(text, 1)
    assert isinstance(rec, Decode) and rec.graph is on
    bulk, by_template = piece_records((text + "\n" + text + "\n").encode(), year=2026)
    assert [r.to_json() for r in bulk] == [r.to_json() for r in parse_lines([text, text], year=2026)]
    assert by_template == 2


def test_summarize_names_every_real_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's first check: the kit's three logs give three named rows, a baseline, speed-ups."""
    from specmon.cli import main

    files = [str(SAMPLES / f"sglang_0_5_23_{n}.log") for n in ("nospec", "eagle3_k3", "ngram_k3")]
    assert main(["summarize", *files, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "sglang"
    assert [r["label"] for r in out["runs"]] == ["no speculation", "EAGLE3 3 steps", "NGRAM 3 tokens"]
    assert out["baseline"]["label"] == "no speculation"
    assert out["verdict"]["best"] == "NGRAM 3 tokens" and out["verdict"]["speedup_pct"] > 0
    rendered = main(["summarize", *files, "--format", "markdown"])
    text = capsys.readouterr().out
    assert rendered == 0 and "unknown config" not in text and "baseline" in text
    # The copies in sample_logs are the kit's verbatim logs.
    for n in ("nospec", "eagle3_k3", "ngram_k3"):
        assert (SAMPLES / f"sglang_0_5_23_{n}.log").read_bytes() == (DATA / "sglang_cpu_kit" / f"{n}.log").read_bytes()


# -- one launch, one run: lines real SGLang prints around its start and stop -----------------------


def _runs(name: str) -> list[Any]:
    from specmon.model.session import Session

    s = Session()
    for rec in parse_lines(read_lines(KIT + name), year=2026):
        s.ingest(rec)
    return [r for r in s.runs if r.used]


def test_decode_lines_before_the_ready_line_are_the_same_launch() -> None:
    """Under load SGLang serves requests during its warm-up: 8 decode lines come before "fired up
    and ready to roll" (line 94), 11 after; all are the one launch the server_args line began."""
    runs = _runs("ready_after_decode.log")
    assert [(r.label, r.first_line) for r in runs] == [("EAGLE3 1 step", 14)]
    assert runs[0].ready_at is not None
    decodes = [r for r in parse_lines(read_lines(KIT + "ready_after_decode.log"), year=2026) if isinstance(r, Decode)]
    assert len(decodes) == 19 and sum(d.line < 94 for d in decodes) == 8


def test_decode_lines_while_draining_after_sigint_are_the_same_launch() -> None:
    """After SIGINT uvicorn says "Shutting down" (line 116) and the scheduler finishes the requests in
    flight: 6 more decode lines, the same launch's, not an unknown configuration."""
    runs = _runs("drain_after_sigint.log")
    assert [r.label for r in runs] == ["EAGLE3 3 steps"]


@settings(max_examples=40, deadline=None)
@given(drained=st.integers(min_value=0, max_value=74), bulk=st.booleans())
def test_a_stopped_server_stays_stopped_while_it_drains_whatever_is_read_after_its_shutdown_line(
        drained: int, bulk: bool) -> None:
    """However many lines after "Shutting down" (line 116) have been read, the decode lines among them
    (the requests in flight) are counted in the launch and the server is stopped, in the session and
    in a fleet's row: before, the first drained line made it "serving" again, and a fleet showed a
    stopped replica as live, then quiet. Line by line and through the bulk path alike."""
    from specmon.model.fleet import FleetModel, ReplicaInput, ReplicaState
    from specmon.model.run import ServerState
    from specmon.model.session import Session

    lines = read_lines(KIT + "drain_after_sigint.log")[:116 + drained]
    records = (piece_records(("\n".join(lines) + "\n").encode(), year=2026)[0] if bulk
               else list(parse_lines(lines, year=2026)))
    s = Session()
    for rec in records:
        s.ingest(rec)
    run = s.current
    assert run is not None and [r.label for r in s.runs if r.used] == ["EAGLE3 3 steps"]
    assert run.state is ServerState.STOPPED and s.state is ServerState.STOPPED
    # Every decode line, the drained ones too, is a sample of the launch.
    assert len(run.live_throughput) == sum(isinstance(r, Decode) for r in records)
    row = FleetModel().snapshot([ReplicaInput("r", "r.log", s, lines=len(lines), last_sample_at=1.0)], 2.0).replicas[0]
    assert row.state is ReplicaState.STOPPED, row
