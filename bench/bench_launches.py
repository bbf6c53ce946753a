"""Verdicts across restarts, measured on simulated campaigns with known truth.

Two settings, a baseline A and a contender B, whose launches each run at their
own speed (a lognormal factor with the condition's launch CV, optionally a
slow drift of 1% per hour of campaign), with the simulated Kimi campaign's
within-launch noise (``w``, read from :mod:`specmon.sim.sweepworld`'s own decode
lines at start-up). A restart costs 10 minutes; a decode line arrives every second.

For each condition (launch CV 0, 2, 5, 10%; without and with drift) and each
truth (B equal to A; B ahead by twice the launch CV, 5% at CV 0), the bench runs:

* **launch design** (``--order launches``): rounds of launches, extend-or-relaunch,
  judged after the planned rounds on the two-level intervals. The fast path
  below calls the very functions :class:`specmon.experiment.rounds.LaunchRounds`
  calls (:mod:`specmon.experiment.stats.design`: ``summaries``, ``to_launch``, ``extend``,
  ``launch_samples``, ``judge_round``; ``effective_rule``, ``design_tau2``), with
  each launch's mean and batch-means error drawn from their distributions
  instead of line by line (1,000 seeds take seconds, not hours);
* **today's rule** (before this change): one launch per setting, measured in the
  given order, the sample rule's looks (40…1,600 samples) on within-launch
  intervals, the same seeds' launch factors.

and, with ``--runner N``, N seeds of the launch design through the real sweep
runner (:class:`specmon.experiment.sweep_run.Sweep` on :class:`~specmon.sim.sweepworld.SweepWorld`,
line by line) at launch CV 5%, so the fast path can be checked against it.

Reported: false winners (B named separated when equal), power (B named when
ahead), coverage of the 95% interval of B − A (and of each setting's mean,
without drift), restarts and hours per campaign.

    python bench/bench_launches.py [--seeds 1000] [--runner 200] [--summarize 500]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import time
import zlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from specmon.experiment.rounds import DEFAULT_RATE, design_tau2, effective_rule
from specmon.experiment.stats.design import (
    DEFAULT_WITHIN_PER_SAMPLE,
    MAX_LAUNCHES,
    Noise,
    extend,
    judge_round,
    launch_samples,
    plan,
    reschedule,
    summaries,
    to_launch,
    within_per_sample,
)
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.launches import Estimate, Launch
from specmon.model.stats import Summary, t975
from specmon.model.stopping import StoppingRule, adjusted_difference
from specmon.sim.model import SpecConfig, launch_speed
from specmon.sim.sweepworld import SweepWorld, line_sampler

RESTART_S = 600.0
RATE = 1.0  # decode lines a second
POLL = 10  # samples between the runner's polls
LAUNCH_CV_ASSUMED = 0.05


def calibrate_w(lines: int = 40_000, n: int = 200) -> float:
    """``w`` of the simulator's decode lines: (batch-means se / mean)² · n over launches of ``n`` lines."""
    from specmon.model.launches import launch_of

    sample = line_sampler(SpecConfig.make(2), random.Random(7))
    xs = [sample()[2] for _ in range(lines)]
    vals = []
    for i in range(0, lines - n + 1, n):
        x = launch_of(xs[i:i + n])
        assert x is not None and x.se is not None
        vals.append((x.se / x.mean) ** 2 * n)
    return sum(vals) / len(vals)


@dataclass
class World:
    """Known truth: per-setting means, launch factors from a seeded stream, within-launch noise."""

    seed: int
    means: dict[str, float]
    cv: float
    drift: float
    w: float
    now: float = 0.0
    restarts: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(zlib.crc32(repr((self.seed, "within")).encode()))

    def factor(self) -> float:
        self.restarts += 1
        self.now += RESTART_S
        rng = random.Random(zlib.crc32(repr((self.seed, "launch", self.restarts)).encode()))
        return launch_speed(rng, self.cv, hours=self.now / 3600, drift_pct_per_hour=self.drift)

    def launch(self, key: str, n: int, name: str) -> Launch:
        """A finished launch of ``n`` lines: its mean and batch-means error, drawn from their laws."""
        f = self.factor()
        mu = self.means[key] * f
        self.now += n / RATE
        k = n // max(1, math.isqrt(n))
        mean = mu * (1 + math.sqrt(self.w / n) * self.rng.gauss(0, 1))
        se = mu * math.sqrt(self.w / n) * math.sqrt(self.rng.gammavariate((k - 1) / 2, 2) / (k - 1))
        return Launch(mean, se, float(k - 1), n, name)


@dataclass
class Outcome:
    separated: bool
    winner: str | None
    diff_covers: bool
    reported_covers: bool
    mean_covers: list[bool]
    restarts: int
    hours: float


def noise_of(launches: dict[Hashable, list[Launch]], restart_s: float = RESTART_S) -> Noise:
    """As :meth:`specmon.experiment.rounds.LaunchRounds.noise`: design launch variance, w, rate, restart time
    (``restart_s``: bench_bai's campaign restarts slower)."""
    between, _ = summaries(launches, LAUNCH_CV_ASSUMED)
    tau2 = design_tau2(between.tau2, between.df, between.estimated, LAUNCH_CV_ASSUMED)
    all_l = [x for ls in launches.values() for x in ls]
    w = within_per_sample(all_l) or DEFAULT_WITHIN_PER_SAMPLE
    return Noise(tau2, w, RATE if all_l else DEFAULT_RATE, restart_s)


def launch_design(world: World, resolve_pct: float, rule: StoppingRule) -> Outcome:
    """The launch design's loop (:meth:`specmon.experiment.rounds.LaunchRounds.run`) on drawn launches."""
    judge_rule, looks = effective_rule(rule, resolve_pct, LAUNCH_CV_ASSUMED, RESTART_S)
    keys = ["A", "B"]
    launches: dict[Hashable, list[Launch]] = {k: [] for k in keys}
    done: set[Hashable] = set()
    round_no = 0
    while round_no < looks[-1]:
        round_no += 1
        active = [k for k in keys if k not in done]
        between, sums = summaries(launches, LAUNCH_CV_ASSUMED)
        leader = max(sums, key=lambda k: sums[k].mean) if sums else None
        counts = {k: len(v) for k, v in launches.items()}
        for key in to_launch(active, counts, leader, "A", round_no):
            noise = noise_of(launches)
            m_new = launch_samples(noise, rule.min_samples, rule.max_samples)
            ns = [x.n for x in launches[key]]
            n = rule.min_samples
            # The runner polls every POLL samples and asks `extend` with the running launch last.
            while n < rule.max_samples and extend(noise, [*ns, n], m_new):
                n += POLL
            launches[key].append(world.launch(key, n, f"{key}{round_no}"))
        if round_no in looks:
            _, sums = summaries(launches, LAUNCH_CV_ASSUMED)
            decisions = judge_round(judge_rule, sums, active, last=round_no == looks[-1])
            done |= {k for k, d in decisions.items() if d.stop}
            if len(done) == len(keys):
                break
            if round_no < looks[-1]:
                needed = plan(resolve_pct, noise_of(launches), 2, judge_rule.test_level, rule.min_samples,
                              rule.max_samples).launches
                looks = reschedule(looks, round_no, needed, MAX_LAUNCHES)
    _, sums = summaries(launches, LAUNCH_CV_ASSUMED)
    return _verdict(world, sums, judge_rule)


def _verdict(world: World, sums: dict[Hashable, Summary], rule: StoppingRule) -> Outcome:
    best, runner = sorted(sums, key=lambda k: sums[k].mean, reverse=True)
    d = adjusted_difference(sums[best], sums[runner], rule.test_level)
    separated = d.known and d.low > 0  # type: ignore[operator]
    a, b = sums["A"], sums["B"]
    truth = world.means["B"] - world.means["A"]
    # The interval the verdict prints: best − runner-up at the rule's adjusted level.
    t_best = world.means[str(best)] - world.means[str(runner)]
    reported = d.known and d.low <= t_best <= d.high  # type: ignore[operator]
    if isinstance(a.model, Estimate) and isinstance(b.model, Estimate):
        _, lo, hi = b.model.difference(a.model, 0.95)
    else:
        dd = adjusted_difference(b, a, 0.95)
        lo, hi = dd.low, dd.high
    covers = lo is not None and hi is not None and lo <= truth <= hi
    mean_cov = [s.ci95_low is not None and s.ci95_high is not None and s.ci95_low <= world.means[k] <= s.ci95_high
                for k, s in sums.items()]
    return Outcome(separated, str(best) if separated else None, covers, reported, mean_cov, world.restarts,
                   world.now / 3600)


def todays_rule(world: World, rule: StoppingRule) -> Outcome:
    """One launch per setting, the sample rule's looks on within-launch intervals (before launches counted)."""
    sums: dict[Hashable, Summary] = {}
    for key in ("A", "B"):
        f = world.factor()
        mu = world.means[key] * f
        total = 0.0  # Σ of (sample − mu) / mu: a random walk with variance w per sample
        n_prev = 0
        for point in rule.look_points:
            total += world.rng.gauss(0, math.sqrt(world.w * (point - n_prev)))
            n_prev = point
            world.now += 0  # (time added below, once the setting stops)
            mean = mu * (1 + total / point)
            k = point // max(1, math.isqrt(point))
            se = mu * math.sqrt(world.w / point) * math.sqrt(world.rng.gammavariate((k - 1) / 2, 2) / (k - 1))
            half = t975(k - 1) * se
            s = Summary(point, mean, mean, mean, mean, 0.0, se, float(k - 1), mean - half, mean + half, k)
            sums[key] = s
            others = {o: v for o, v in sums.items() if o != key}
            if rule.decide(s, others).stop:
                break
        world.now += n_prev / RATE
    return _verdict(world, sums, rule)


def run_condition(cv: float, drift: float, seeds: int, w: float) -> dict[str, list[Outcome]]:
    delta = 2 * cv if cv > 0 else 0.05
    resolve = 100 * delta * 0.5
    rule = StoppingRule()
    out: dict[str, list[Outcome]] = {"new_equal": [], "new_ahead": [], "old_equal": [], "old_ahead": []}
    for seed in range(seeds):
        for truth, means in (("equal", {"A": 90.0, "B": 90.0}), ("ahead", {"A": 90.0, "B": 90.0 * (1 + delta)})):
            out[f"new_{truth}"].append(launch_design(World(seed, means, cv, drift, w), resolve, rule))
            out[f"old_{truth}"].append(todays_rule(World(seed, means, cv, drift, w), rule))
    return out


#: The runner's conditions: name, the two step counts, the aliases (known equals), what it shows.
RUNNER_CONDITIONS = (
    ("equal", (2, 3), {3: 2}, "two equal settings"),
    ("2v3", (2, 3), {}, "2 vs 3 steps (truth +2.5%)"),
    ("1v2", (1, 2), {}, "1 vs 2 steps (truth +10.5%)"),
)


def runner_campaigns(seeds: int, cv: float) -> dict[str, list[tuple[bool, bool, int, float, bool, list[bool], bool]]]:
    """The launch design through the real sweep runner on SweepWorld, line by line.

    ``equal``: 2 steps against "3 steps" that runs like 2 steps (``alias``: the log says 3
    steps, two rows, one truth); ``2v3``: 2 steps against 3 steps (truth +2.5%, half the launch
    CV); ``1v2``: 1 step against 2 steps (truth +10.5%, twice the launch CV). Per seed:
    separated, the 95% interval of the difference covers the truth, restarts, hours, the
    verdict's (adjusted) interval covers the truth, each setting's 95% interval (the table's
    ``tok/s ± 95% CI``) covers its true mean, and the truly faster setting was named.
    """
    out: dict[str, list[tuple[bool, bool, int, float, bool, list[bool], bool]]] = {}
    for name, (a, b), alias, _what in RUNNER_CONDITIONS:
        out[name] = []
        for seed in range(seeds):
            world = SweepWorld(seed, launch_cv=cv, restart_s=RESTART_S, lines_per_poll=POLL, alias=alias)
            plan = SweepPlan((a, b), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=POLL / RATE,
                             settle=2, launch_cv=LAUNCH_CV_ASSUMED, resolve_pct=100 * 2 * cv * 0.5)
            sweep = Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                          sleep=world.sleep)
            result = asyncio.run(sweep.run())
            v = result.verdict
            assert v is not None
            rows = {r.steps: r for r in v.analysis.rows}
            truth = world.expected(a) - world.expected(b)
            d = rows[a].throughput.model.difference(rows[b].throughput.model, 0.95)  # type: ignore[union-attr]
            covers = d[1] is not None and d[2] is not None and d[1] <= truth <= d[2]
            best, runner = (a, b) if v.best is not None and v.best.steps == a else (b, a)
            t_best = world.expected(best) - world.expected(runner)
            reported = v.diff is not None and v.diff.known and v.diff.low <= t_best <= v.diff.high  # type: ignore[operator]
            means = [t.ci95_low is not None and t.ci95_high is not None and t.ci95_low <= world.expected(k) <= t.ci95_high
                     for k, t in ((k, rows[k].throughput) for k in (a, b)) if t is not None]
            faster = a if world.expected(a) > world.expected(b) else b
            named = v.separated and v.best is not None and v.best.steps == faster
            out[name].append((v.separated, covers, result.restarts, world.now / 3600, reported, means, named))
    return out


def summarize_campaigns(seeds: int, cv: float, launches: int, lines: int = 150) -> list[tuple[bool, list[bool]]]:
    """``specmon summarize --format json`` on real simulated server logs, ``launches`` starts per setting.

    Two settings with equal truth: 2 steps, and 3 steps whose launches are sped up to 2 steps'
    expected throughput (their log lines say 3 steps: two rows). Each launch is its own log
    file (:func:`specmon.sim.sweep.simulate_launch`: start-up, a sequential client, shutdown)
    with its own speed factor. Returns, per seed, whether a winner was named and whether each
    row's 95% interval covers the truth.
    """
    import contextlib
    import io
    import json
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from specmon.cli import main as cli_main
    from specmon.sim.model import DEFAULT_MODEL
    from specmon.sim.sweep import simulate_launch

    truth = DEFAULT_MODEL.expected_throughput(SpecConfig.make(2))
    slow = truth / DEFAULT_MODEL.expected_throughput(SpecConfig.make(3))
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-launches-") as tmp:
        for seed in range(seeds):
            rng = random.Random(zlib.crc32(repr((seed, "summarize")).encode()))
            paths = []
            t = 1.77e9
            for j in range(launches):
                for steps, scale in ((2, 1.0), (3, slow)):
                    model = replace(DEFAULT_MODEL, speed=launch_speed(rng, cv) * scale)
                    text, t = simulate_launch(SpecConfig.make(steps), seed=rng.randrange(1 << 30), start=t,
                                              decode_lines=lines, model=model)
                    path = Path(tmp) / f"s{seed}_{steps}_{j}.log"
                    path.write_text(text, encoding="utf-8")
                    paths.append(str(path))
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                code = cli_main(["summarize", *paths, "--format", "json", "--jobs", "1"])
            assert code == 0, code
            doc = json.loads(buf.getvalue())
            covers = [r["throughput"]["ci95_low"] <= truth <= r["throughput"]["ci95_high"] for r in doc["runs"]]
            out.append((bool(doc["verdict"]["separated"]), covers))
            for p in paths:
                Path(p).unlink()
    return out


def pct(xs: Sequence[bool]) -> str:
    return f"{100 * sum(xs) / len(xs):5.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--runner", type=int, default=0, help="seeds through the real sweep runner at launch CV 5%%")
    ap.add_argument("--summarize", type=int, default=0, help="seeds through summarize on simulated logs")
    args = ap.parse_args()
    t0 = time.time()
    w = calibrate_w()
    print(f"within-launch noise of the simulator: w = {w:.4f} per line ({100 * math.sqrt(w / 60):.2f}% "
          f"for a one-minute launch); restart {RESTART_S / 60:.0f} min; {args.seeds} seeds per condition; "
          f"assumed launch CV {100 * LAUNCH_CV_ASSUMED:g}%")
    head = (f"{'launch CV':>9} {'drift':>6} {'rule':>6} | {'false win':>9} {'power':>7} {'verdict':>8} "
            f"{'95% Δ':>8} {'95% μ':>8} | {'restarts':>8} {'hours':>6}")
    print(head)
    print("-" * len(head))
    for cv in (0.0, 0.02, 0.05, 0.10):
        for drift in (0.0, 1.0):
            res = run_condition(cv, drift, args.seeds, w)
            for rule in ("old", "new"):
                eq, ah = res[f"{rule}_equal"], res[f"{rule}_ahead"]
                both = eq + ah
                cov_mu = pct([c for o in eq for c in o.mean_covers]) if drift == 0 else "   n/a"
                print(f"{100 * cv:8.0f}% {drift:5.0f}% {('today' if rule == 'old' else 'new'):>6} | "
                      f"{pct([o.separated for o in eq]):>9} {pct([o.winner == 'B' for o in ah]):>7} "
                      f"{pct([o.reported_covers for o in both]):>8} "
                      f"{pct([o.diff_covers for o in both]):>8} {cov_mu:>8} | "
                      f"{sum(o.restarts for o in both) / len(both):8.1f} {sum(o.hours for o in both) / len(both):6.2f}")
    if args.runner:
        runs = runner_campaigns(args.runner, 0.05)
        for name, _steps, _alias, what in RUNNER_CONDITIONS:
            r = runs[name]
            named = "" if name == "equal" else f" (the faster one {pct([x[6] for x in r])})"
            print(f"real sweep runner, launch CV 5%, {what}, {args.runner} seeds: winner named "
                  f"{pct([x[0] for x in r])}{named}; the verdict's interval covers the truth {pct([x[4] for x in r])}, "
                  f"the 95% one {pct([x[1] for x in r])}, each setting's 95% {pct([c for x in r for c in x[5]])}; "
                  f"restarts {sum(x[2] for x in r) / len(r):.1f}, "
                  f"hours {sum(x[3] for x in r) / len(r):.2f}")
    if args.summarize:
        for cv, launches in ((0.05, 2), (0.05, 3), (0.10, 3)):
            r2 = summarize_campaigns(args.summarize, cv, launches)
            print(f"summarize on simulated logs, launch CV {100 * cv:g}%, two equal settings with {launches} "
                  f"launches each, {args.summarize} seeds: winner named {pct([x[0] for x in r2])}, "
                  f"95% intervals cover the truth {pct([c for x in r2 for c in x[1]])}")
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
