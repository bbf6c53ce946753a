"""Launch luck and a probe the setting cannot change: their correlation across launches, on a real kit.

Issue 44, item 2: if a probe measured at the start of every launch (the prefill speed of a fixed
burst of long prompts with one output token) tracks the launch's decode speed, regression on it
(CUPED, ANCOVA) would take launch luck out of the launch means and save launches. This bench
measures that correlation on one of the real kits of ``shared/``, one setting launched again and
again: for each launch it

1. starts the kit's ``serve.sh`` with the setting and waits for ``/health``;
2. sends the probe: ``--probe`` prompts of about ``--probe-words`` words, each led by a fresh random
   number (no prefix cache can serve it), ``max_tokens`` 1, one at a time; the probe's figure is
   prompt tokens over the seconds the requests took;
3. measures decode: ``--requests`` requests of the bundled prompts through specmon's own load driver
   (concurrency 1, ``--max-tokens``), the launch's decode tok/s the mean of the requests' decode speeds;
4. stops the server (SIGINT, as the kits say).

Printed: each launch's probe and decode figures, the launch CV of both, Pearson's ρ with its 95%
interval (Fisher's z), ρ², and the launches a covariate-adjusted mean would save at that ρ
(the variance of a launch mean falls by 1 − ρ²).

    python bench/bench_probe.py --kit llamacpp --launches 16 [--steps 4]
    python bench/bench_probe.py --kit vllm --launches 12 --steps 3
    python bench/bench_probe.py --kit sglang --launches 12 --steps 2
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specmon.control.load import BUNDLED_PROMPTS, LoadConfig, LoadDriver

SHARED = Path(os.environ.get("SPECMON_SHARED", Path(__file__).resolve().parents[2] / "shared"))
KITS = {
    "llamacpp": ("real_server_llamacpp", 8041),
    "vllm": ("real_server", 8042),
    "sglang": ("real_server_sglang", 30042),
}
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
    "matches",
    "between",
    "fierce",
    "zebras",
    "and",
    "patient",
    "owls",
    "under",
    "amber",
    "lanterns",
]


def _start(kit: str, steps: int, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    folder, port = KITS[kit]
    proc = subprocess.Popen(
        ["bash", str(SHARED / folder / "serve.sh"), str(steps), str(log), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{kit}: the server ended while starting ({log})")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{kit}: not ready within 600 s ({log})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _model(port: int) -> str | None:
    try:
        data = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


def _probe(port: int, model: str | None, n: int, words: int, rng: random.Random) -> float:
    """Prompt tokens a second over ``n`` one-token requests of long, never-cached prompts."""
    tokens, seconds = 0, 0.0
    with httpx.Client(timeout=300) as client:
        for _ in range(n):
            prompt = f"{rng.randrange(10**12)} " + " ".join(rng.choice(WORDS) for _ in range(words))
            body = {
                "prompt": prompt,
                "max_tokens": 1,
                "temperature": 0,
                "cache_prompt": False,
                **({"model": model} if model else {}),
            }
            t0 = time.perf_counter()
            r = client.post(f"http://127.0.0.1:{port}/v1/completions", json=body)
            seconds += time.perf_counter() - t0
            r.raise_for_status()
            tokens += int(r.json()["usage"]["prompt_tokens"])
    return tokens / seconds


async def _decode(port: int, requests: int, max_tokens: int) -> float:
    driver = LoadDriver(
        LoadConfig(f"http://127.0.0.1:{port}", prompts=BUNDLED_PROMPTS, max_tokens=max_tokens, request_timeout_s=300)
    )
    report = await driver.run(1, max_requests=requests)
    speeds = report.decode_tps()
    if not speeds:
        raise SystemExit(f"no timed request: {report.results[0].error if report.results else 'none sent'}")
    return statistics.fmean(speeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kit", choices=tuple(KITS), required=True)
    ap.add_argument("--launches", type=int, default=12)
    ap.add_argument(
        "--steps",
        default="4",
        help="a step count, or several (0,4): launched in turn, to see whether the setting moves the probe",
    )
    ap.add_argument("--probe", type=int, default=4, help="probe requests per launch")
    ap.add_argument("--probe-words", type=int, default=400)
    ap.add_argument("--requests", type=int, default=12, help="decode requests per launch")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    settings = [int(s) for s in str(a.steps).split(",")]
    probes, decodes, launched = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        for i in range(a.launches):
            t0 = time.monotonic()
            steps = settings[i % len(settings)]
            proc, port = _start(a.kit, steps, Path(tmp) / f"launch{i}.log")
            try:
                model = _model(port)
                probe = _probe(port, model, a.probe, a.probe_words, rng)
                decode = asyncio.run(_decode(port, a.requests, a.max_tokens))
            finally:
                _stop(proc)
            probes.append(probe)
            decodes.append(decode)
            launched.append(steps)
            print(
                f"launch {i + 1:2d} ({steps} steps): probe {probe:9.1f} prompt tok/s   decode {decode:8.2f} tok/s   "
                f"({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
    _analyse(a.kit, settings, launched, probes, decodes)


def _analyse(kit: str, settings: list[int], launched: list[int], probes: list[float], decodes: list[float]) -> None:
    """Per setting: the launch CV of both figures; within settings: ρ (Pearson, its Fisher interval; Spearman)."""
    cv = lambda xs: statistics.stdev(xs) / statistics.fmean(xs)  # noqa: E731
    groups = {s: [i for i, t in enumerate(launched) if t == s] for s in settings}
    # Within-setting deviations: a setting that moves both figures must not make a correlation.
    dx, dy = [], []
    print()
    for s, idx in groups.items():
        px, dc = [probes[i] for i in idx], [decodes[i] for i in idx]
        print(
            f"{kit}, {s} steps, {len(idx)} launches: probe {statistics.fmean(px):.1f} (launch CV "
            f"{100 * cv(px):.1f}%), decode {statistics.fmean(dc):.2f} tok/s (launch CV {100 * cv(dc):.1f}%)"
        )
        dx += [x / statistics.fmean(px) - 1 for x in px]
        dy += [y / statistics.fmean(dc) - 1 for y in dc]
    if len(groups) > 1:
        a, b = (([probes[i] for i in groups[s]]) for s in settings[:2])
        t = stats.ttest_ind(a, b, equal_var=False)
        print(
            f"does the setting move the probe? {settings[0]} against {settings[1]} steps: "
            f"{100 * (statistics.fmean(a) / statistics.fmean(b) - 1):+.1f}%, Welch p {t.pvalue:.3f}"
        )
    n = len(dx) - len(groups) + 1  # one mean taken out per setting
    r, p = stats.pearsonr(dx, dy)
    z, se = math.atanh(r), 1 / math.sqrt(max(n - 3, 1))
    lo, hi = math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se)
    rs = stats.spearmanr(dx, dy)[0]
    print(
        f"within settings: Pearson rho {r:+.3f} (95% interval {lo:+.3f}..{hi:+.3f}, p {p:.3f}), Spearman "
        f"{rs:+.3f}; rho^2 {r * r:.3f}: a covariate-adjusted launch mean would need {100 * (1 - r * r):.0f}% of "
        f"the launches (if rho held)"
    )


if __name__ == "__main__":
    main()
