"""Every key of the dashboard, in one place: the bindings, the footer, the help and the palette.

Each key belongs to what it acts on (:attr:`KeyAction.owner`): the dashboard screen's
``BINDINGS`` (:func:`dashboard_bindings`: the view, its table and its restart panel) and the
app's (:func:`app_bindings`: themes, the restart and sweep flows, help, quit). The help screen's
key tables (:func:`help_tables`), the footer's order and the command palette all read
:data:`ACTIONS` and :data:`DIALOG_KEYS`, so they cannot list different actions; a test checks
the README's key tables against them too.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

__all__ = ["ACTIONS", "APP", "DASHBOARD", "DIALOG_KEYS", "KeyAction", "app_bindings", "by_action", "dashboard_bindings",
           "help_tables", "markdown_table"]

#: The owners of the keys: the app (app-wide, from every full screen) and the dashboard screen
#: (only while the dashboard is shown).
APP = "app"
DASHBOARD = "dashboard"


@dataclass(frozen=True, slots=True)
class KeyAction:
    """One dashboard action.

    Attributes:
        action: The app's action name (``action_<name>``).
        keys: Textual key names, comma-separated (``d,escape``).
        display: How help, README and palette write the keys (``d`` / ``escape``).
        footer: The footer's label ("" keeps it out of the footer).
        title: The command palette's title (None: Textual's own action, not a palette entry).
        help: What it does, as help and the README say it.
        priority_keys: Keys bound with priority, before any widget or dialog (``ctrl+c``).
        rank: Which labels the footer drops first when the terminal is narrow (low first).
        owner: Whose binding it is: :data:`DASHBOARD` (the dashboard screen's: it acts on the view
            shown) or :data:`APP` (the app's: it acts from every full screen).
    """

    action: str
    keys: str
    display: str
    footer: str
    title: str | None
    help: str
    priority_keys: str = ""
    rank: int = 5
    owner: str = APP


#: The dashboard's actions, in the order of the footer, the help and the README.
#: The dashboard screen owns what acts on the view it shows (pause, speed, baseline, export, the
#: event log, the restart panel's g and d). The app keeps what is app-wide, so those keys act from
#: the events, details and report screens too: the theme is the app's, the restart and sweep are
#: app-level flows (their dialogs go over any screen, and quitting asks about them), help and quit.
ACTIONS: tuple[KeyAction, ...] = (
    KeyAction("toggle_pause", "p", "`p`", "Pause", "Pause / resume",
              "pause / resume (a replay stops; a live view freezes while data keeps arriving)", rank=4,
              owner=DASHBOARD),
    KeyAction("mark_baseline", "b", "`b`", "Baseline", "Mark baseline",
              "mark the current configuration as the baseline (again: automatic baseline)", rank=3,
              owner=DASHBOARD),
    KeyAction("export", "e", "`e`", "Export", "Export run table",
              "export the run table as CSV, JSON and Markdown (the path is shown)", rank=2,
              owner=DASHBOARD),
    KeyAction("next_theme", "t", "`t`", "Theme", "Next theme", "next colour theme", rank=0),
    # In the footer only while replaying (hidden otherwise: check_action says False).
    KeyAction("faster", "plus,equals_sign", "`+`", "Faster", "Replay faster", "replay faster", rank=1,
              owner=DASHBOARD),
    KeyAction("slower", "minus", "`-`", "Slower", "Replay slower", "replay slower", rank=1, owner=DASHBOARD),
    KeyAction("restart", "r", "`r`", "Restart", "Restart server",
              "restart the server with another step count (the commands are shown first)", rank=9),
    KeyAction("sweep", "s", "`s`", "Sweep", "Sweep step counts",
              "sweep step counts (during a sweep: offer to stop it)", rank=8),
    KeyAction("go_back", "g", "`g`", "Go back", "Go back",
              "after a failed restart, go back to the previous configuration (the commands are shown first)",
              rank=9, owner=DASHBOARD),
    KeyAction("dismiss", "d,escape", "`d` / `escape`", "Dismiss", "Dismiss panel",
              "dismiss the restart panel once the restart ended", rank=7, owner=DASHBOARD),
    KeyAction("events", "l", "`l`", "", "Event log",
              "the whole event log: full lines, both clocks; `/` filter, `!` levels, `f` fold", rank=0,
              owner=DASHBOARD),
    KeyAction("help", "question_mark", "`?`", "Help", "Help",
              "help: what every number means, and every key (`escape` closes it)", rank=6),
    KeyAction("quit", "q", "`q` / `ctrl+c`", "Quit", "Quit",
              "quit (asks first while a restart or a sweep is running)", priority_keys="ctrl+c", rank=10),
    KeyAction("command_palette", "ctrl+p", "`ctrl+p`", "", None,
              "command palette: every action, and why one cannot run now"),
)

#: Keys of the dialogs (step count, sweep list, confirmation): help and README list them too.
DIALOG_KEYS: tuple[tuple[str, str], ...] = (
    ("`enter`", "step-count and sweep dialogs: next (the exact commands are shown before anything runs)"),
    ("`y`", "confirmation: run the commands shown"),
    ("`x`", "confirmation: switch to the exact strings sent to the host"),
    ("`n` / `escape`", "any dialog: cancel, nothing runs"),
)


def by_action(action: str) -> KeyAction:
    """The entry of one action."""
    return next(a for a in ACTIONS if a.action == action)


def _bindings(owner: str) -> list[BindingType]:
    out: list[BindingType] = []
    for a in ACTIONS:
        if a.action == "command_palette" or a.owner != owner:
            continue
        shown = a.display.split(" / ")[0].strip("`")
        out.append(Binding(a.keys, a.action, a.footer or a.title or a.action, show=bool(a.footer),
                           key_display=shown, tooltip=a.help))
        if a.priority_keys:
            # Before any dialog or input: ctrl+c quits from anywhere, as in htop and k9s.
            out.append(Binding(a.priority_keys, a.action, a.footer, show=False, priority=True))
    return out


def app_bindings() -> list[BindingType]:
    """The app's bindings: what acts from every full screen (Textual's own ``ctrl+p`` is left to Textual)."""
    return _bindings(APP)


def dashboard_bindings() -> list[BindingType]:
    """The dashboard screen's bindings: what acts on the view it shows (modal screens over it stop them)."""
    return _bindings(DASHBOARD)


def markdown_table(rows: list[tuple[str, str]]) -> str:
    """``| key | action |`` rows as a Markdown table."""
    lines = ["| key | action |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def help_tables() -> str:
    """The help screen's two key tables (dashboard, dialogs), in Markdown."""
    return ("## Keys\n\n" + markdown_table([(a.display, a.help) for a in ACTIONS])
            + "\n\n## Keys in dialogs\n\n" + markdown_table(list(DIALOG_KEYS)) + "\n")
