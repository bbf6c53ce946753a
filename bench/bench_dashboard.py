"""Benchmark: the live dashboard replaying a 2,000,000-line log at ``--speed max``, headless.

Not a test (machines are shared and noisy): it prints figures. It measures what
issue 3 asks, with the app fully running (timers, widgets, plot, analysis):

* lines/s ingested, from the first line to the last (target ≥ 100,000);
* the refresh rate achieved by the live view (4 Hz planned) and the plot (≤ 1 Hz);
* key-press latency while ingesting: a key event enters through the driver every
  50 ms and its binding's action records when it ran; p50/p95/max (target p95 ≤ 100 ms);
* RSS at start, at 0.2M lines and at the end (target: growth ≤ 30 MB from 0.2M to 2M).

The log is generated first: the simulated SGLang EAGLE-3 campaign (``specmon.sim``:
6 launches, no speculation then 1, 2, 3, 5, 10 steps), each launch's steady state
repeated with shifted timestamps until the file has ``--lines`` lines (the
simulator itself writes ~7k lines/s; tiling keeps generation short).

Usage: python bench/bench_dashboard.py [--lines N] [--keep PATH] [--size 100x30]
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402
from textual.binding import Binding  # noqa: E402

from specmon.ingest.live import FeedInput  # noqa: E402
from specmon.sources.replay import ReplayClock, ReplaySource  # noqa: E402
from specmon.ui.app import DashboardOptions, SpecmonApp  # noqa: E402
from specmon.ui.theming import theme_folders  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
KEY_EVERY_S = 0.05


def rss_mb() -> float:
    """Resident set size of this process, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


# -- the log -----------------------------------------------------------------------------------------

def _stamp_parser() -> tuple:  # type: ignore[type-arg]
    parse_cache: dict[str, int] = {}
    fmt_cache: dict[int, str] = {}

    def parse(text: str) -> int:
        v = parse_cache.get(text)
        if v is None:
            v = parse_cache[text] = calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))
        return v

    def fmt(epoch: int) -> str:
        v = fmt_cache.get(epoch)
        if v is None:
            if len(fmt_cache) > 200_000:
                fmt_cache.clear()
            v = fmt_cache[epoch] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))
        return v

    return parse, fmt


def _kind(line: str) -> str:
    if "Decode batch" in line:
        return "decode"
    if "Prefill batch" in line:
        return "prefill"
    if "HTTP/1.1" in line:
        return "access"
    return "other"


def write_log(path: Path, total: int, seed: int = 7, block_decode_lines: int = 3000) -> dict[str, int]:
    """Write the tiled simulated campaign; returns how many lines of each kind it has."""
    from specmon.sim.model import SpecConfig
    from specmon.sim.sweep import CAMPAIGN_START, CAMPAIGN_STEPS, simulate_launch

    parse, fmt = _stamp_parser()
    kinds = {"decode": 0, "prefill": 0, "access": 0, "other": 0}
    start = float(CAMPAIGN_START)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for k, steps in enumerate(CAMPAIGN_STEPS):
            text, end = simulate_launch(SpecConfig.make(steps), seed=seed * 1000 + steps, start=start,
                                        decode_lines=block_decode_lines)
            lines = text.splitlines()
            # One start-up, then the steady state (requests and decode batches) over and over,
            # then the shutdown: one long launch per configuration.
            ready = next(i for i, ln in enumerate(lines) if "fired up and ready" in ln)
            head, block, tail = lines[:ready + 1], lines[ready + 1:-2], lines[-2:]
            block_kinds = [_kind(ln) for ln in block]
            quota = total // len(CAMPAIGN_STEPS) if k < len(CAMPAIGN_STEPS) - 1 else total - written
            first, last = parse(block[0][1:20]), parse(block[-1][1:20])
            span = last - first + 1
            body = quota - len(head) - len(tail)
            out.write("\n".join(head) + "\n")
            kinds["other"] += len(head) + len(tail)
            n, rep = 0, 0
            while n < body:
                shift = rep * span
                chunk = []
                for ln, kind in zip(block[: body - n], block_kinds, strict=False):
                    if ln.startswith("[") and len(ln) > 21 and ln[20] in " ]":
                        ln = "[" + fmt(parse(ln[1:20]) + shift) + ln[20:]
                    chunk.append(ln)
                    kinds[kind] += 1
                out.write("\n".join(chunk) + "\n")
                n += len(chunk)
                rep += 1
            shift = (rep - 1) * span
            out.write("\n".join("[" + fmt(parse(ln[1:20]) + shift) + ln[20:] for ln in tail) + "\n")
            written += len(head) + n + len(tail)
            start = end + shift + 60.0
    return kinds


# -- the app under measurement ----------------------------------------------------------------------

class BenchApp(SpecmonApp):
    """The dashboard plus a key whose action records when it ran, and counters of refreshes."""

    BINDINGS = [*SpecmonApp.BINDINGS, Binding("f12", "bench_ping", "ping", show=False)]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.pings: list[float] = []
        self.live_ticks: list[float] = []

    def action_bench_ping(self) -> None:
        self.pings.append(time.perf_counter())

    def time_plot_draws(self) -> None:
        """Record when the plot really rebuilds its figure."""
        self.plot_draws: list[float] = []  # redraws for new data
        self.plot_layout_draws = 0  # redraws because the plot changed size or theme
        plot = self.dashboard._plot
        draw = plot._draw
        last: list[object] = [None]

        def timed_draw() -> None:
            looks = (plot.size, self.theme)
            if looks != last[0]:
                self.plot_layout_draws += 1
                last[0] = looks
            else:
                self.plot_draws.append(time.perf_counter())
            draw()

        plot._draw = timed_draw  # type: ignore[method-assign]

    def count_live_ticks(self) -> None:
        """Record each live refresh: the dashboard screen's "live refresh" timer holds its own bound
        ``_tick`` (taken when the screen mounted), so the timer's callback is the one wrapped."""
        timer = next(t for t in self.dashboard._timers if t.name == "live refresh")
        tick = timer._callback
        assert tick is not None

        def counted() -> None:
            self.live_ticks.append(time.perf_counter())
            tick()

        timer._callback = counted


async def measure(path: Path, size: tuple[int, int], total: int) -> dict[str, float]:
    clock = ReplayClock(None)
    source = ReplaySource(path, clock, wall_clock=time.time)
    app = BenchApp([FeedInput(source, year=source.year)], replay_clock=clock,
                   options=DashboardOptions(animations=False), theme_dirs=theme_folders(None))
    out: dict[str, float] = {"rss_start": rss_mb()}
    latencies: list[float] = []
    async with app.run_test(headless=True, size=size) as pilot:
        app.time_plot_draws()
        app.count_live_ticks()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        ticks0 = len(app.live_ticks)
        rss_02 = None
        samples: list[tuple[int, float, bool]] = []
        while not app.feeder.done:
            seen = len(app.pings)
            key = events.Key("f12", None)
            key.set_sender(app)
            sent = time.perf_counter()
            app._driver.send_message(key)  # the way a terminal's key press enters the app
            while len(app.pings) == seen and not app.feeder.done:
                await asyncio.sleep(0.001)
            if len(app.pings) > seen:
                latencies.append(app.pings[-1] - sent)
            samples.append((app.feeder.lines, rss_mb(), app.dashboard._analysis_running))
            if rss_02 is None and app.feeder.lines >= total // 10:
                rss_02 = rss_mb()
                out["lines_at_rss_02"] = app.feeder.lines
            await asyncio.sleep(KEY_EVERY_S)
        t1 = time.perf_counter()
        cpu1 = time.process_time()
        ticks = len(app.live_ticks) - ticks0
        draw_times = [t for t in app.plot_draws if t0 <= t <= t1]
        draws = len(draw_times)
        gaps = [b - a for a, b in zip(draw_times, draw_times[1:], strict=False)]
        out["rss_end"] = rss_mb()  # the final analysis is usually in flight now: its copies count
        out["rss_end_analysing"] = float(app.dashboard._analysis_running)
        after = [(r, busy) for n, r, busy in samples if n >= total // 10]
        out["rss_peak"] = max((r for r, _ in after), default=float("nan"))
        out["rss_peak_idle"] = max((r for r, busy in after if not busy), default=float("nan"))
        while app.dashboard._analysis_running:
            await asyncio.sleep(0.05)
        await pilot.pause()
        app.refresh_now()  # the final table, as the user sees it when the replay ends
        await pilot.pause()
        out["rss_settled"] = rss_mb()
        table = app.builder.table(app.feeder.session)
        out["decode_samples"] = sum(len(run.throughput) for run in app.feeder.session.runs)
        out["best_steps"] = next((r.steps for r in table.rows if r.best), -1) or 0
    elapsed = t1 - t0
    out.update({
        "lines": app.feeder.lines,
        "elapsed": elapsed,
        "lines_per_s": app.feeder.lines / elapsed,
        "cpu": cpu1 - cpu0,
        "load": os.getloadavg()[0],
        "live_hz": ticks / elapsed,
        "plot_hz": draws / elapsed,
        "plot_draws": draws,
        "plot_layout_draws": app.plot_layout_draws,
        "plot_min_gap": min(gaps, default=float("nan")),
        "rss_02": rss_02 if rss_02 is not None else float("nan"),
        "keys": len(latencies),
        "key_p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "key_p95_ms": (statistics.quantiles(latencies, n=20)[18] * 1000 if len(latencies) >= 20
                       else max(latencies, default=float("nan")) * 1000),
        "key_max_ms": max(latencies, default=float("nan")) * 1000,
    })
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--keep", type=Path, help="write the log here and keep it (reused if it exists)")
    ap.add_argument("--size", default="100x30", help="terminal size, WxH (default 100x30)")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    tmp = None
    if args.keep is not None:
        path = args.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="specmon-bench-")
        path = Path(tmp.name) / "bench.log"
    try:
        if not path.exists():
            t = time.perf_counter()
            kinds = write_log(path, args.lines)
            print(f"generated {args.lines:,} lines ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t:.1f} s: " + ", ".join(f"{v:,} {k}" for k, v in kinds.items()))
        r = asyncio.run(measure(path, (w, h), args.lines))
    finally:
        if tmp is not None:
            tmp.cleanup()
    import textual

    print(f"reference: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, Textual {textual.__version__}, terminal {w}x{h} headless, "
          f"replay --speed max, a key every {KEY_EVERY_S * 1000:.0f} ms; load average {r['load']:.1f} "
          f"(other processes share the cores: this process used {r['cpu']:.1f} s CPU in {r['elapsed']:.1f} s)")
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    print(f"lines ingested        {r['lines']:,.0f} in {r['elapsed']:.1f} s = {r['lines_per_s']:,.0f} lines/s "
          f"(target ≥ 100,000: {ok(r['lines_per_s'] >= 100_000)}); "
          f"{r['lines'] / r['cpu']:,.0f} lines per CPU second")
    print(f"refresh achieved      live view {r['live_hz']:.2f} Hz (planned 4); plot {r['plot_draws']:.0f} redraws for "
          f"new data = {r['plot_hz']:.2f} Hz, shortest interval between two {r['plot_min_gap']:.2f} s (≤ 1 Hz: "
          f"{ok(r['plot_min_gap'] >= 0.9)}), plus {r['plot_layout_draws']:.0f} for a new size or theme")
    print(f"key latency           p50 {r['key_p50_ms']:.1f} ms, p95 {r['key_p95_ms']:.1f} ms, "
          f"max {r['key_max_ms']:.1f} ms over {r['keys']:.0f} presses (target p95 ≤ 100: "
          f"{ok(r['key_p95_ms'] <= 100)})")
    growth = r["rss_end"] - r["rss_02"]
    print(f"RSS                   start {r['rss_start']:.0f} MB, at {r.get('lines_at_rss_02', 0):,.0f} lines "
          f"{r['rss_02']:.0f} MB, end of ingest {r['rss_end']:.0f} MB: growth {growth:.1f} MB "
          f"(target ≤ 30: {ok(growth <= 30)}); settled after the last analysis {r['rss_settled']:.0f} MB "
          f"(growth {r['rss_settled'] - r['rss_02']:.1f} MB)")
    print(f"                      during ingest: peak {r['rss_peak']:.0f} MB, peak while no analysis ran "
          f"{r['rss_peak_idle']:.0f} MB; an analysis was {'' if r['rss_end_analysing'] else 'not '}running "
          f"at the end of ingest")
    print(f"                      (the session keeps 16 bytes per counted decode sample: "
          f"{r['decode_samples']:,} samples = {r['decode_samples'] * 16 / 1e6:.1f} MB of that growth is the data)")
    print(f"final table           best configuration: {r['best_steps']:.0f} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
