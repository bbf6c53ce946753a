"""LMDeploy, the fifth engine: its stats line, its configuration line and its counters.

One real excerpt is public (``tests/data/real_logs/lmdeploy_metrics_log_pr4297_2026_02.log``,
from LMDeploy's PR #4297). Everything else here is written from LMDeploy's source, as
SOURCES.md says: the stats line from ``LoggingStatLogger.log`` and ``get_spec_msg``
(``lmdeploy/metrics/loggers.py``), the configuration line from ``AsyncEngine``'s
``logger.info(f'speculative_config={speculative_config}')`` under its logger's format
(``lmdeploy/utils.py``), the ``/metrics`` series from ``PrometheusStatLogger``'s names and
labels, exported by prometheus_client (the library LMDeploy uses) and served over HTTP.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
from calendar import timegm
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server

from specmon.config import Profile
from specmon.control.launch import LaunchProfile
from specmon.engines import ADAPTERS, NAMES, adapter, by_name
from specmon.ingest.bulk import piece_records
from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine, parse_lines
from specmon.records import Config, Decode, Engine, Spec
from specmon.sources.metrics import MetricsScraper, decode_speed, difference, metrics_url_for, parse_snapshot

REAL = Path(__file__).resolve().parents[1] / "data" / "real_logs" / "lmdeploy_metrics_log_pr4297_2026_02.log"
LMDEPLOY = Engine("lmdeploy")


# -- the lines as LMDeploy's source writes them ------------------------------------------------


def stats_line(*, stamp: str = "2026-08-21 22:31:54", dp: int = 0, tin: float = 12.3, tout: float = 456.7,
               server: tuple[int, ...] = (10, 0, 4, 0), running: int = 4, waiting: int = 0, kv: float = 0.125,
               prefix: float = 0.0, spec: tuple[int, int, int, tuple[int, ...]] | None = None) -> str:
    """``LoggingStatLogger.log``'s line: ``spec`` is (drafts, draft tokens, accepted, accepted by position)."""
    if len(server) == 4:
        middle = "Server (succeeded/failed/routed/waiting): " + " / ".join(str(x) for x in server)
    else:  # the name of PR #4297's build
        middle = "API server (completed/routed/waiting): " + " / ".join(str(x) for x in server)
    line = (f"[{stamp} DP{dp}] Avg thr (in/out): {tin:.1f} / {tout:.1f} tokens/s, {middle}, "
            f"Engine (running/waiting): {running} / {waiting}, KV cache: {kv * 100:.1f}%, ")
    if prefix != 0:
        line += f"Prefix cache hit rate: {prefix * 100:.1f}%, "
    if spec is not None:
        drafts, tokens, accepted, per_pos = spec
        rate = accepted / tokens * 100 if tokens > 0 else float("nan")
        rates = ", ".join(f"{p / drafts:.3f}" for p in per_pos)
        line += ("SpecDecoding metrics: "
                 f"Draft acceptance rate: {rate:.2f}%, "
                 f"Mean acceptance length: {1 + accepted / drafts:.2f}, "
                 f"Accepted: {accepted} tokens, "
                 f"Drafted: {tokens} tokens, "
                 f"Per-position acceptance rate: {rates}")
    return line


def config_line(spec: str, stamp: str = "2026-08-21 22:30:01,517") -> str:
    return f"{stamp} - lmdeploy - INFO - async_engine.py:131 - speculative_config={spec}"


EAGLE3_K3 = "SpeculativeConfig(method='eagle3', model='/models/eagle3-draft', num_speculative_tokens=3)"


# -- the real excerpt -------------------------------------------------------------------------


def test_the_real_line_is_read_as_lmdeploys() -> None:
    text = REAL.read_text(encoding="utf-8").rstrip("\n")
    (rec,) = list(parse_lines([text]))
    assert isinstance(rec, Decode) and rec.engine is LMDEPLOY
    assert rec.timestamp == timegm((2026, 2, 5, 17, 5, 17, 0, 0, 0)) and rec.rank == "DP0"
    assert (rec.gen_throughput, rec.running_req, rec.queue_req) == (2756.3, 45, 5)
    assert rec.token_usage == pytest.approx(0.216)
    assert rec.accept_len is None and rec.accept_rate is None
    assert detect_engine([text]) is LMDEPLOY
    assert rec.to_json()["engine"] == "lmdeploy"


# -- its stats line, over the values its format can print --------------------------------------


@st.composite
def _spec(draw: st.DrawFn) -> tuple[int, int, int, tuple[int, ...]]:
    k = draw(st.integers(1, 6))
    drafts = draw(st.integers(1, 10_000))
    per_pos = tuple(draw(st.integers(0, drafts)) for _ in range(k))
    per_pos = tuple(sorted(per_pos, reverse=True))  # a later position is accepted only after the earlier
    return drafts, drafts * k, sum(per_pos), per_pos


@settings(max_examples=150)
@given(tout=st.floats(0.1, 1e5), running=st.integers(0, 4096), waiting=st.integers(0, 4096),
       kv=st.floats(0, 1), prefix=st.floats(0, 1), dp=st.integers(0, 63),
       old=st.booleans(), spec=st.none() | _spec())
def test_every_line_its_format_prints_is_read(tout: float, running: int, waiting: int, kv: float, prefix: float,
                                              dp: int, old: bool, spec: tuple[int, int, int, tuple[int, ...]] | None
                                              ) -> None:
    line = stats_line(dp=dp, tout=tout, running=running, waiting=waiting, kv=kv, prefix=prefix,
                      server=(1, 50, 50) if old else (10, 0, 4, 0), spec=spec)
    rec = LineParser().parse(line, 7)
    assert isinstance(rec, Decode), line  # never vLLM's Spec, though the line holds its words
    assert rec.engine is LMDEPLOY and rec.rank == f"DP{dp}" and rec.line == 7
    assert rec.gen_throughput == float(f"{tout:.1f}")
    assert (rec.running_req, rec.queue_req) == (running, waiting)
    assert rec.token_usage == pytest.approx(float(f"{kv * 100:.1f}") / 100)
    if spec is None:
        assert rec.accept_len is None and rec.accept_rate is None
    else:
        drafts, tokens, accepted, _ = spec
        assert rec.accept_len == float(f"{1 + accepted / drafts:.2f}")
        assert rec.accept_rate == pytest.approx(float(f"{accepted / tokens * 100:.2f}") / 100)


@pytest.mark.parametrize("cut", [20, 40, 60])
def test_a_damaged_line_is_kept_as_unparsed(cut: int) -> None:
    line = stats_line(spec=(10, 30, 12, (6, 4, 2)))
    damaged = line[: line.index("Avg thr") + cut].replace("456.7", "4x6.7")
    rec = LineParser().parse(damaged, 1)
    assert rec is not None and rec.kind == "unparsed"


def test_an_unreadable_acceptance_is_unparsed_not_dropped() -> None:
    line = stats_line(spec=(10, 30, 12, (6, 4, 2))).replace("Draft acceptance rate: 40.00%", "Draft acceptance rate: x%")
    line = line.replace("Mean acceptance length: 2.20", "Mean acceptance length: y")
    rec = LineParser().parse(line, 1)
    assert rec is not None and rec.kind == "unparsed"


# -- its configuration line -------------------------------------------------------------------


def test_its_configuration_line() -> None:
    rec = LineParser().parse(config_line(EAGLE3_K3), 3)
    assert isinstance(rec, Config) and rec.engine is LMDEPLOY
    assert (rec.algorithm, rec.steps, rec.draft_tokens) == ("eagle3", 3, 3)
    assert rec.timestamp == pytest.approx(timegm((2026, 8, 21, 22, 30, 1, 0, 0, 0)) + 0.517)
    off = LineParser().parse(config_line("None"), 4)
    assert isinstance(off, Config) and off.engine is LMDEPLOY and off.steps == 0 and off.algorithm is None


def test_vllms_engine_line_stays_vllms() -> None:
    # vLLM's engine-init line also says speculative_config=SpeculativeConfig( in its middle.
    line = ("INFO 11-29 07:53:51 [core.py:77] Initializing a V1 LLM engine (v0.32.0) with config: "
            "model='/m', speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3), "
            "tokenizer='/m'")
    rec = LineParser().parse(line, 1)
    assert isinstance(rec, Config) and rec.engine is Engine.VLLM and rec.steps == 3


# -- a whole log: the session, and the bulk path against the line path -------------------------


def _log() -> list[str]:
    lines = [config_line(EAGLE3_K3), "INFO:     Application startup complete."]
    for i in range(12):
        spec = (100 + i, 3 * (100 + i), 150 + i, (80 + i, 50, 20))
        lines.append(stats_line(stamp=f"2026-08-21 22:3{2 + i // 6}:{(i % 6) * 10:02d}", tout=400.0 + i,
                                running=8, spec=spec))
    # A pause of minutes (LMDeploy prints nothing while idle), then one interval of work.
    lines.append(stats_line(stamp="2026-08-21 22:50:00", tout=420.0, running=8, spec=(90, 270, 120, (70, 40, 10))))
    return lines


def test_a_session_of_its_log_is_lmdeploys_and_counts_after_a_pause() -> None:
    s = Session()
    s.begin_source("lmdeploy.log")
    for rec in parse_lines(_log()):
        s.ingest(rec)
    assert s.engine is LMDEPLOY
    (run,) = s.runs
    assert run.engine is LMDEPLOY and run.label == "eagle3 3 tokens"
    assert run.excluded_warmup == adapter(LMDEPLOY).warmup == 1
    # Its throughput covers one interval, not the time since its previous line: the line after the
    # pause is a sample (SGLang's would be dropped as spanning idle time).
    assert run.excluded_idle == 0 and len(run.throughput) == 12 and run.throughput[-1] == 420.0
    assert len(run.accept_len) == 12


def test_the_bulk_path_gives_the_line_paths_records() -> None:
    lines = _log() * 40
    data = ("\n".join(lines) + "\n").encode()
    bulk, _by_template = piece_records(data, year=2026)
    line = list(parse_lines(lines, year=2026))
    assert bulk == line
    assert [getattr(r, "engine", None) for r in bulk] == [getattr(r, "engine", None) for r in line]
    assert all(r.engine is LMDEPLOY for r in bulk if isinstance(r, Decode))


# -- its counters -------------------------------------------------------------------------------


class LMDeployExporter:
    """LMDeploy's ``PrometheusStatLogger`` series that specmon reads, named and labelled as it makes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        values = ["internlm", "0"]

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labelnames=labels, registry=self.registry)

        self.gen = counter("lmdeploy:generation_tokens", "Number of generation tokens processed.").labels(*values)
        self.drafts = counter("lmdeploy:spec_decode_num_drafts", "Number of speculative decoding drafts.").labels(*values)
        self.tokens = counter("lmdeploy:spec_decode_num_draft_tokens",
                              "Number of speculative decoding draft tokens.").labels(*values)
        self.accepted = counter("lmdeploy:spec_decode_num_accepted_tokens",
                                "Number of speculative decoding accepted tokens.").labels(*values)
        self._per_pos_base = Counter("lmdeploy:spec_decode_num_accepted_tokens_per_pos",
                                     "Number of accepted speculative decoding tokens per draft position.",
                                     labelnames=[*labels, "position"], registry=self.registry)
        self._values = values

    def step(self, generated: int, drafts: int, k: int, per_pos: tuple[int, ...]) -> None:
        self.gen.inc(generated)
        self.drafts.inc(drafts)
        self.tokens.inc(drafts * k)
        self.accepted.inc(sum(per_pos))
        for pos, n in enumerate(per_pos):
            self._per_pos_base.labels(*self._values, str(pos)).inc(n)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 5), drafts=st.integers(1, 5000), seconds=st.floats(0.5, 60), data=st.data())
def test_its_counters_give_its_own_definitions(k: int, drafts: int, seconds: float, data: st.DataObject) -> None:
    ex = LMDeployExporter()
    ex.step(10, 2, k, tuple([1] * k))
    before = parse_snapshot(ex.text(), 100.0)
    per_pos = tuple(sorted((data.draw(st.integers(0, drafts)) for _ in range(k)), reverse=True))
    generated = drafts + sum(per_pos)
    ex.step(generated, drafts, k, per_pos)
    after = parse_snapshot(ex.text(), 100.0 + seconds)
    assert before.engine == after.engine == "lmdeploy"
    sample = difference(before, after)
    assert sample is not None
    # LMDeploy's own: 1 + accepted / drafts (its mean acceptance length, with the bonus token),
    # accepted / draft tokens (its acceptance rate), accepted at each position / drafts.
    assert sample.accept_len == pytest.approx(1 + sum(per_pos) / drafts)
    assert sample.accept_rate == pytest.approx(sum(per_pos) / (drafts * k))
    assert sample.per_position == pytest.approx(tuple(p / drafts for p in per_pos))
    assert sample.throughput == pytest.approx(generated / seconds)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4000), st.floats(0.05, 120)), min_size=1, max_size=20))
def test_its_request_histograms_give_the_decode_speed(requests: list[tuple[int, float]]) -> None:
    """(Σ tokens − requests) / Σ decode seconds over the requests finished in between: its
    ``request_generation_tokens`` and ``request_decode_time_seconds`` histograms, as vLLM's."""
    ex = LMDeployExporter()
    tokens = Histogram("lmdeploy:request_generation_tokens", "Number of generation tokens processed.",
                       labelnames=["model_name", "engine"], registry=ex.registry).labels("internlm", "0")
    decode = Histogram("lmdeploy:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                       labelnames=["model_name", "engine"], registry=ex.registry).labels("internlm", "0")
    ex.step(5, 1, 1, (1,))
    tokens.observe(5)
    decode.observe(0.5)
    before = parse_snapshot(ex.text(), 0.0)
    for n, secs in requests:
        tokens.observe(n)
        decode.observe(secs)
        ex.step(n, 1, 1, (0,))
    after = parse_snapshot(ex.text(), 10.0)
    want = (sum(n for n, _ in requests) - len(requests)) / sum(s for _, s in requests)
    got = decode_speed(before, after)
    if want <= 0:
        assert got is None
    else:
        assert got == pytest.approx(want)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_scraper_reads_a_server_on_its_port() -> None:
    ex = LMDeployExporter()
    port = _free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=ex.registry)
    scraper = MetricsScraper(metrics_url_for(port, engine=LMDEPLOY))
    try:
        ex.step(50, 10, 3, (8, 5, 2))
        assert await scraper.scrape_once() is None  # the first scrape is the base
        assert scraper.available and scraper.engine == "lmdeploy"
        ex.step(120, 40, 3, (30, 20, 10))
        await asyncio.sleep(0.01)
        sample = await scraper.scrape_once()
        assert sample is not None
        assert sample.accept_len == pytest.approx(1 + 60 / 40) and sample.accept_rate == pytest.approx(60 / 120)
        assert sample.per_position == pytest.approx((0.75, 0.5, 0.25))
    finally:
        await scraper.stop()
        server.shutdown()
        thread.join(timeout=5)


# -- registered with one line: the name everywhere a name is taken ----------------------------------


def test_the_registry_names_it_everywhere() -> None:
    ad = by_name("lmdeploy")
    assert ad is not None and ad in ADAPTERS and ad.engine is LMDEPLOY and "lmdeploy" in NAMES
    assert pickle.loads(pickle.dumps(LMDEPLOY)) is LMDEPLOY and LMDEPLOY in list(Engine)
    assert Profile.model_validate({"host": "gpu", "log": "/x.log", "engine": "lmdeploy"}).engine is LMDEPLOY
    lp = LaunchProfile(engine="lmdeploy", argv=["lmdeploy", "serve", "api_server", "/m", "--speculative-num-draft-tokens",
                                                "{steps}"], log="/tmp/l_{steps}.log", ready_marker="startup complete")
    assert lp.engine == "lmdeploy"
    assert ad.serves(["lmdeploy", "serve", "api_server", "/m"]) and not ad.serves(["vllm", "serve", "/m"])
    assert metrics_url_for(23333, engine=LMDEPLOY).endswith(":23333/metrics")
    with pytest.raises(ValueError):
        Engine.register("Not A Name")
    assert Engine.register("lmdeploy") is LMDEPLOY
    assert not any(isinstance(r, Spec) for r in parse_lines(_log()))
