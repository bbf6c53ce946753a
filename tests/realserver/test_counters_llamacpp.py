"""llama.cpp's ``/metrics`` as a counters source, on the real ``llama-server`` (the kit's build 11434).

The kit's ``serve.sh 4 LOG PORT`` runs llama-server with a draft model
(``draft-simple``, 4 draft tokens) and ``--metrics``. specmon's load driver keeps
one request in flight while the scraper reads ``/metrics`` every second; then:

* the counters' drafted and accepted tokens over the load equal, token for
  token, the sums of the log's per-request ``draft acceptance = R (A accepted / G
  generated)`` lines (the same requests, counted by the same server);
* the counters' decode speed (``tokens_predicted_total`` over
  ``tokens_predicted_seconds_total``) against the log's per-request ``eval time =
  X ms / N tokens`` lines pooled (Σ N / Σ X) and against the client's per-request
  decode speed pooled (like for like: tokens after the first over first-to-last
  token time), within 10%;
* ``watch LOG --metrics URL``'s dashboard shows accept length, acceptance rate,
  per-position acceptance and tok/s tagged ``counters``.

Marked ``realserver``; skips (fails under CI=true) without the kit. llama-server
is ready in a fraction of a second: about 1 minute in all. Ports 18350-18399. The
server is stopped by its PID (SIGINT, then SIGKILL) in a finally.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from specmon.control.load import LoadConfig, LoadDriver
from specmon.ingest.files import ingest_file
from specmon.model.session import Session
from specmon.sources.metrics import MetricsScraper, decode_speed, parse_snapshot
from tests.support import realkits

pytestmark = pytest.mark.realserver

#: Requests of the load: all of them finish (a request cut off by a time limit is in the counters,
#: which count the work done, but not in the log, which prints a request's line when it completes).
REQUESTS = 100
#: Only turns a hang into a failure.
LOAD_LIMIT_S = 240.0
READY_WAIT_S = 60.0
_EVAL = re.compile(r"(?<!prompt )eval time =\s*(?P<ms>[\d.]+) ms /\s*(?P<n>\d+) tokens")


@contextlib.asynccontextmanager
async def llama_server(tmp_path: Path, steps: int = 4) -> AsyncIterator[tuple[str, Path]]:
    """The kit's llama-server on a port of 18350-18399; yields its base URL and log."""
    realkits.require(realkits.llama_missing())
    serve = realkits.shared_dir() / "real_server_llamacpp" / "serve.sh"
    port = realkits.free_port(realkits.COUNTERS_PORTS)
    log = tmp_path / f"llama_{steps}.log"
    env = dict(os.environ, LLAMA_PREFIX=str(realkits.llama_prefix()))
    proc = subprocess.Popen(["bash", str(serve), str(steps), str(log), str(port)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_WAIT_S
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                assert proc.poll() is None, f"llama-server exited during start-up:\n{log.read_text()[-2000:]}"
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(base + "/health", timeout=2)).status_code == 200:
                        break
                assert time.monotonic() < deadline, f"llama-server not ready within {READY_WAIT_S:g} s"
                await asyncio.sleep(0.1)
        yield base, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # serve.sh execs llama-server: this PID is the server
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


async def test_llamacpp_counters_agree_with_its_log_and_the_client(tmp_path: Path) -> None:
    async with llama_server(tmp_path) as (base, log):
        scraper = MetricsScraper(base + "/metrics", interval_s=1.0)
        try:
            scraper.start()
            assert await scraper.wait_available(10), scraper.problem
            assert scraper.engine == "llamacpp"
            async with httpx.AsyncClient(trust_env=False) as client:
                before = parse_snapshot((await client.get(base + "/metrics")).text, 0.0)
                report = await LoadDriver(LoadConfig(base, max_tokens=256)).run(
                    1, max_requests=REQUESTS, max_seconds=LOAD_LIMIT_S)
                await asyncio.sleep(2)  # the last scrape
                after = parse_snapshot((await client.get(base + "/metrics")).text, 1.0)
        finally:
            await scraper.stop()
    # (llama-server closes a kept-alive connection now and then: the driver sends such a request again.)
    assert report.errors == 0 and len(report.ok) >= 10, [r.error for r in report.results if not r.ok]
    samples = scraper.samples
    assert report.stopped_by != "max_seconds", "the load did not finish its requests in time"
    assert len(samples) >= 5  # requests finish several times a second: a sample at every scrape
    # The counters over the whole load, and the log's per-request lines of the same requests.
    def delta(name: str) -> float:
        return (after.get(name) or 0.0) - (before.get(name) or 0.0)

    c_drafted = delta("llamacpp:spec_decode_num_draft_tokens_total")
    c_accepted = delta("llamacpp:spec_decode_num_accepted_tokens_total")
    c_steps = delta("llamacpp:spec_decode_num_drafts_total")
    session = Session(warmup=0)  # every request, as the counters count them
    ingest_file(session, str(log))
    runs = [r for r in session.runs if r.drafted]
    assert len(runs) == 1
    run = runs[0]
    assert run.config is not None and run.config.steps == 4
    text = log.read_text(errors="replace")
    evals = [(int(m["n"]), float(m["ms"])) for m in _EVAL.finditer(text)]
    l_decode = sum(n for n, _ in evals) / sum(ms for _, ms in evals) * 1000.0
    c_decode = decode_speed(before, after)
    assert c_decode is not None
    timed = [r for r in report.ok if r.decode_tps() is not None]
    client_pooled = (sum(r.output_tokens - (r.first_tokens if r.first_tokens is not None else 1) for r in timed)
                     / sum(r.last_token_s - r.first_token_s for r in timed))  # type: ignore[operator]
    c_len = 1 + c_accepted / c_steps
    s_len = [s.accept_len for s in samples if s.accept_len is not None]
    pos = [s.per_position for s in samples if s.per_position]
    figures = (f"counters: {c_accepted:.0f}/{c_drafted:.0f} accepted/drafted, accept len {c_len:.3f} (per-second "
               f"samples {statistics.fmean(s_len):.3f}), decode {c_decode:.1f} tok/s; log: "
               f"{run.accepted}/{run.drafted}, per-request accept len {statistics.fmean(run.accept_len):.3f}, "
               f"eval pooled {l_decode:.1f} tok/s over {len(evals)} requests (mean of the requests' "
               f"{statistics.fmean(run.throughput):.1f}); client: decode pooled "
               f"{client_pooled:.1f} tok/s over {len(timed)} timed of {len(report.ok)}")
    print("\n" + figures)
    # The same requests counted by the same server: exactly equal.
    assert (c_accepted, c_drafted) == (run.accepted, run.drafted), figures
    assert c_steps > 0 and 1.0 < c_len <= 5.0, figures
    assert pos and all(len(p) == 4 and all(0.0 <= v <= 1.0 for v in p) for p in pos), figures
    # Decode speed, like for like: the engine's counters, its log, the client.
    assert abs(c_decode / l_decode - 1) < 0.10, figures
    assert abs(client_pooled / c_decode - 1) < 0.10, figures


async def test_watch_with_metrics_shows_llamacpp_counters_in_the_dashboard(tmp_path: Path) -> None:
    from specmon.ui.counters import LiveCounters, fixed_url
    from specmon.ui.factories import watch_app
    from specmon.ui.widgets.metric_panel import MetricPanel
    from specmon.ui.widgets.position_bars import PositionBars
    from tests.support.app_factory import options

    async with llama_server(tmp_path) as (base, log):
        counters = LiveCounters(fixed_url(base + "/metrics"), where=base + "/metrics")
        app = watch_app(log, options=options(warmup=0), user_themes=None, counters=counters)
        load = asyncio.ensure_future(LoadDriver(LoadConfig(base, max_tokens=256)).run(1, max_seconds=60))
        try:
            async with app.run_test(size=(120, 36)) as pilot:
                panels = [app.query_one(f"#m-{n}", MetricPanel) for n in ("throughput", "accept-len", "accept-rate")]
                bars = app.query_one(PositionBars)
                await realkits.wait_until(
                    pilot, lambda: all(p.border_subtitle.startswith("counters") for p in panels)
                    and bars.border_subtitle == "counters", "every figure from the counters", 60)
                tp, al, ar = (p._view for p in panels)
                assert tp is not None and al is not None and ar is not None
                assert tp.current is not None and tp.current > 0
                assert al.current is not None and 1.0 <= al.current <= 5.0
                assert ar.current is not None and 0.0 <= ar.current <= 1.0
                assert bars.view is not None and bars.view.values is not None and len(bars.view.values) == 4
                events = "\n".join(e.text for e in app.feeder.session.events)
                assert "counters: reading llamacpp /metrics" in events
                print(f"\nwatch --metrics on llama-server: tok/s {tp.mean:.1f}, accept len {al.mean:.3f}, "
                      f"accept rate {ar.mean:.3f}, per position {bars.view.values}")
        finally:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
