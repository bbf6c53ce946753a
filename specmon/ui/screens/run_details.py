"""One configuration's details (Enter on a row of the run table): what its numbers rest on.

Samples over time (a strip with a fixed y-range, so two strips compare by eye), a histogram,
what the warm-up and idle rules excluded, and the exact server arguments — the start command
specmon ran for it, or what the log announced. :func:`details_lines` builds the text (pure,
tested); :class:`RunDetailsScreen` shows it. Designed at 80×24 first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from specmon.model.analysis import ConfigRow
from specmon.model.run import DEFAULT_WARMUP, IDLE_GAP_FACTOR, IDLE_GAP_MIN_S
from specmon.records import Engine
from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached
from specmon.ui.widgets.key_footer import KeyFooter

__all__ = ["RunDetailsScreen", "details_lines", "histogram_lines", "strip_line"]

_BLOCKS = " ▁▂▃▄▅▆▇█"


def strip_line(values: Sequence[float], width: int, lo: float, hi: float) -> str:
    """Samples in time order as one line of block characters, ``width`` cells, on the range lo..hi.

    Each cell is the mean of its slice; the range is fixed (not the series' own min/max),
    so a flat series reads flat and two strips on one range compare by eye.
    """
    if not values or width <= 0:
        return ""
    span = hi - lo if hi > lo else 1.0
    n = len(values)
    cells = []
    for i in range(min(width, n)):
        a, b = i * n // min(width, n), (i + 1) * n // min(width, n)
        chunk = values[a:b] or values[a:a + 1]
        mean = math.fsum(chunk) / len(chunk)
        level = int(round((mean - lo) / span * (len(_BLOCKS) - 2))) + 1
        cells.append(_BLOCKS[max(1, min(len(_BLOCKS) - 1, level))])
    return "".join(cells)


def histogram_lines(values: Sequence[float], *, bins: int = 8, width: int = 40, unit: str = "") -> list[str]:
    """A text histogram: one line per bin, ``  84.0– 86.0 ███████ 123``."""
    if not values:
        return ["(no samples)"]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        return [f"{lo:8.1f}{unit} {'█' * width} {len(values)}"]
    step = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / step))] += 1
    top = max(counts)
    out = []
    for i, c in enumerate(counts):
        bar = "█" * (round(c / top * width) if top else 0)
        out.append(f"{lo + i * step:7.1f}–{lo + (i + 1) * step:6.1f}{unit} {bar:<{width}} {c}")
    return out


def details_lines(row: ConfigRow, *, command: str | None = None, width: int = 76) -> list[str]:
    """What one run-table row rests on, as lines of text.

    Args:
        row: The row (its runs carry the counted samples and what was excluded).
        command: The start command, with a first line saying whose it is (None: unknown).
        width: Columns for the strip of samples over time.
    """
    out = [row.label, ""]
    samples = [float(v) for run in row.runs for v in run.throughput]
    tp = row.throughput
    if tp is not None:
        ci = f" ± {tp.ci_half_width:.1f}" if tp.ci_half_width is not None else " (no interval yet)"
        # The interval covers launches, not samples: say over what (and on which assumption).
        covers = f"{row.covers}; " if row.covers else ""
        out.append(f"throughput  {tp.mean:.1f}{ci} tok/s ({covers}{tp.n:,} counted samples, "
                   f"median {tp.median:.1f}, p10 {tp.p10:.1f}, p90 {tp.p90:.1f}, sd {tp.sd:.1f})")
    else:
        out.append("throughput  no counted samples yet")
    for name, s in (("accept len", row.accept_len), ("accept rate", row.accept_rate)):
        if s is not None:
            ci = f" ± {s.ci_half_width:.2f}" if s.ci_half_width is not None else ""
            out.append(f"{name:<11} {s.mean:.2f}{ci} over {s.n:,} samples")
    out += ["", "samples over time (counted, oldest left; one range for every run of this row)"]
    if samples:
        lo, hi = min(samples), max(samples)
        for run in row.runs:
            values = [float(v) for v in run.throughput]
            if values:
                out.append(f"run {run.id:>3} {strip_line(values, width - 18, lo, hi)}  {len(values):,}")
        out.append(f"        range {lo:.1f} … {hi:.1f} tok/s")
        out += ["", "histogram (tok/s)", *histogram_lines(samples, width=max(10, width - 28))]
    else:
        out.append("(none yet)")
    warm = sum(r.excluded_warmup for r in row.runs)
    idle = sum(r.excluded_idle for r in row.runs)
    engines = {r.engine for r in row.runs} | ({row.config.engine} if row.config else set())
    engine = next((e for e in engines if e is not Engine.UNKNOWN), Engine.UNKNOWN)
    n_warm = DEFAULT_WARMUP.get(engine, 5)
    out += ["", "excluded (counted apart, never silently lost)",
            f"warm-up     {warm:,} samples — the first {n_warm} of each rank in each run (the engine default; "
            "--warmup changes it): caches, graph replays and the first requests are not steady state",
            f"idle        {idle:,} samples — SGLang lines whose gap to the previous one exceeds "
            f"max({IDLE_GAP_MIN_S:g} s, {IDLE_GAP_FACTOR:g}× the rank's typical gap); vLLM intervals with no "
            "running request: they span idle time and report a fraction of the real speed"]
    out += ["", "runs"]
    for run in row.runs:
        state = run.state.value
        out.append(f"run {run.id:>3}  {run.source}  {state}  {len(run.throughput):,} counted"
                   + (f"  crashed: {run.crash_detail}" if run.crash_detail else ""))
    out += ["", "server arguments"]
    if command:
        out += command.splitlines()
    else:
        cfg = row.config
        if cfg is None:
            out.append("not known: the log did not announce a configuration")
        else:
            parts = [f"engine {cfg.engine.value}", f"algorithm {cfg.algorithm or 'none'}",
                     f"steps {cfg.steps if cfg.steps is not None else '?'}"]
            if cfg.topk is not None:
                parts.append(f"top-k {cfg.topk}")
            if cfg.draft_tokens is not None:
                parts.append(f"draft tokens {cfg.draft_tokens}")
            if cfg.model:
                parts.append(f"model {cfg.model}")
            out.append("as the log announced them (specmon did not start this server): " + ", ".join(parts))
    return out


class RunDetailsScreen(Screen[None]):
    """One row's details, scrollable; escape goes back to the dashboard.

    Args:
        row: The run-table row.
        command: The start command specmon ran for it, if any.
    """

    BINDINGS = [Binding("escape,q", "close", "Back", key_display="esc/q")]

    DEFAULT_CSS = """
    RunDetailsScreen #details-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    RunDetailsScreen #details-scroll { height: 1fr; padding: 0 1; }
    RunDetailsScreen #details-body { width: 100%; }
    """

    def __init__(self, row: ConfigRow, *, command: str | None = None) -> None:
        super().__init__()
        self.row = row
        self.command = command
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(literal(f"details: {self.row.label} · escape: back"), id="details-title", markup=False)
        with VerticalScroll(id="details-scroll"):
            yield Static("", id="details-body", markup=False)
        yield KeyFooter(compact=True)  # keys are dropped from Textual's Footer at 80 columns

    @while_attached
    def on_mount(self) -> None:
        width = max(40, self.size.width - 4)
        self.lines = details_lines(self.row, command=self.command, width=width)
        self.query_one("#details-body", Static).update(literal("\n".join(self.lines), newlines=True))
        self.query_one("#details-scroll").focus()

    @property
    def text(self) -> str:
        """Everything shown, as plain text."""
        return "\n".join(self.lines)

    def action_close(self) -> None:
        """Back to the dashboard."""
        self.dismiss(None)
