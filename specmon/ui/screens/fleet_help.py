"""The fleet view's help: its keys, what each column means, and the outlier rules with their constants."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from specmon.model.fleet import (
    ACCEPT_FALL_MIN_WINDOWS,
    ACCEPT_FALL_RATIO,
    OUTLIER_K,
    OUTLIER_MIN_REPLICAS,
    OUTLIER_MIN_SAMPLES,
    OUTLIER_SCALE_FLOOR,
    QUIET_AFTER_S,
)

__all__ = ["FLEET_HELP", "FleetHelpScreen"]

FLEET_HELP = f"""\
# specmon fleet — several replicas side by side

Each log is one replica, read on its own (as `specmon watch PATH` reads one).

**Replicas** — one row each: its name (what differs between the paths), engine and
configuration of its current run, its state (*live*; *quiet* after {QUIET_AFTER_S:g} s without a
new stats line; *no data yet*; *starting*; *crashed*; *stopped*; *no file yet* / *file gone*;
*unreadable*), tok/s as the mean of the last window of counted samples (`--window`) and as the
run's mean with its 95% interval over that one run's samples (*run tok/s ±sample*: batch means, within the
replica's run; its own dashboard's *CI (launch)* adds the launch spread, so 85.1 ± 0.6 here and
85.1 ± 8.4 there are both right), accept length and rate
(the run's means), the source (`log`) and the outlier flags. The line under the table says more
about the highlighted replica: its path, its state, why it is flagged.

**Configurations** — one row each, pooled over the replicas running it with the two-level launch
model: each replica is one launch, so the interval (*CI (replica)*) includes how much replicas differ,
and *CI covers* says over what (`3 replicas`). A configuration on one replica shows that replica's own
interval (`1 replica only`): it says nothing about another replica of it.

**Outliers** — `slow` / `fast`: a replica's run mean tok/s more than {OUTLIER_K:g} robust deviations
from the median of the *other* replicas of its configuration (median absolute deviation scaled to a
normal standard deviation, never below {100 * OUTLIER_SCALE_FLOOR:g}% of the median; needs
{OUTLIER_MIN_REPLICAS} replicas of the configuration with {OUTLIER_MIN_SAMPLES}+ counted samples each).
`acc-low` / `acc-high`: the same rule on accept length. `acc-fell`: the last window's mean accept
length is below {ACCEPT_FALL_RATIO:g}× the run's own mean, once the run has {ACCEPT_FALL_MIN_WINDOWS}
windows of samples.

## Keys

| key | action |
|---|---|
| `enter` | on a replica: its dashboard (`escape` back); on a configuration: filter the replicas to it |
| `o` / `O` | sort the replicas by the next column / reverse the sort (a click on a header sorts too) |
| `/` | filter both tables by part of a replica's name or configuration; `escape` clears it |
| `?` | this help (`escape` closes it) |
| `q` / `ctrl+c` | quit |
"""


class FleetHelpScreen(ModalScreen[None]):
    """A scrollable explanation of the fleet view; escape, ``q`` or ``?`` closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close help")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Markdown(FLEET_HELP)

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
