"""The help screen: every key, and what every number on the dashboard means."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from specmon.ui.keys import help_tables

__all__ = ["HELP_TEXT", "METRICS_TEXT", "HelpScreen"]

METRICS_TEXT = """\
# specmon — what the numbers mean

**Generation throughput** (tok/s) — output tokens per second, as the server
logs it (SGLang `gen throughput`, vLLM `Avg generation throughput`). The big
number is the latest batch; *mean (N)* is the mean of the last N batches. One
reading decides nothing: inside one configuration batches swing by ±20%.
The line under it compares the **current configuration's mean** (warm-up and
idle batches excluded) with the **baseline**: green or red only when the 95%
interval of the difference excludes zero, grey (`~noise`) when it does not,
and `(no CI yet)` while the current run has too few counted samples (warm-up
excluded) for a 95% interval: the difference is not yet better or worse.

**Accept length** (tokens per verify step) — how many tokens one
draft-and-verify cycle yields, **including the bonus token** the target model
always produces. Without speculation it is 1; its ceiling is `steps + 1`
(shown as `/3` for 2 steps). Throughput is roughly accept length ÷ cycle
time, and each extra step makes the cycle longer: more steps only pay if the
accept length rises enough.

**Accept rate** — the share of drafted tokens the target model accepted. Its
definition changed between engine versions, so compare it only within one
version:

* SGLang 2025-10 (v0.5.3): accepted tokens *including* the bonus ÷ (cycles × (steps + 1));
* SGLang late 2025: the denominator became cycles × draft tokens;
* SGLang 2026: accepted drafts *excluding* the bonus ÷ (cycles × (draft tokens − 1));
* vLLM: accepted ÷ drafted draft tokens (bonus excluded), printed in percent;
* llama.cpp: accepted ÷ generated draft tokens.

**Per-position acceptance** — how often draft position 1, 2, ... is accepted
(vLLM and llama.cpp log it; SGLang does not). It decays with depth: steps
whose position is rarely accepted cost time and add little.

**Run table** — one row per configuration seen (restarts with the same
configuration are pooled). *n* counts throughput samples after warm-up;
*tok/s ± CI (launch)* is the mean with a 95% interval over launches: each
server start is one unit, with the launch spread measured (two or more starts
of a setting) or assumed (`--launch-cv`); within a launch, batch means
(consecutive batches are correlated, so a naive interval would be too
narrow). *vs baseline* is the speed-up with its interval. Click a column
header to sort.

**Marks** — ★ a declared winner: the fastest, separated from the runner-up
(the only mark to deploy on). ☆ leads, undecided: the fastest by mean, not
separated from the runner-up, "no winner declared". B the baseline, ▸ the
current run. The line under the table says the same, with the mark.

**What an interval covers** — every ± says it in its header: *CI (launch)*
(*±launch* in a narrow table) over launches (the run table, the sweep,
`summarize`); *±sample* over one run's samples, how precisely that one
launch is known (the fleet's replica table); *CI (replica)* over replicas,
each one launch (the fleet's configurations). So 85.1 ± 8.4 (launch) and
85.1 ± 0.6 (sample) can both be right: a launch is known to ±0.6, the next
launch may land ±8 away.

**Baseline** — by default the run without speculation (or `--baseline FILE`,
or `--baseline-tps X`). Press **b** to make the current configuration the
baseline instead; press it again to go back.

"""

#: The help: what the numbers mean, then every key, from the one key source (:mod:`specmon.ui.keys`).
HELP_TEXT = METRICS_TEXT + "\n" + help_tables()


class HelpScreen(ModalScreen[None]):
    """A scrollable explanation of every metric and key; escape, ``q`` or ``?`` closes it."""

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close help"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Markdown(HELP_TEXT)

    def action_close(self) -> None:
        """Close the help screen."""
        self.dismiss(None)
