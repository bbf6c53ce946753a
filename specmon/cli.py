"""``specmon`` command line: one function per subcommand, registered in :func:`build_parser`.

Expected failures (missing files, bad options, nothing to report) print one
clear sentence on stderr and exit with a documented code; they never show a
traceback. Exit codes: 0 success, 1 nothing found / no verdict possible,
2 usage or input error, 3 a sweep could not measure every requested setting.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from specmon import __version__
from specmon.commands.argtypes import LAUNCH_CV_HELP, launch_cv_pct, positive_float, whole_number, year_arg
from specmon.commands.exits import EXIT_INPUT, EXIT_NOTHING, EXIT_OK, fail

# -- summarize ---------------------------------------------------------------------------------

def cmd_summarize(args: argparse.Namespace) -> int:
    """``specmon summarize FILE...``: the per-configuration table, headless."""
    from specmon.ingest.summarize import ingest_files
    from specmon.model.analysis import analyze
    from specmon.output.tables import crash_lines, print_analysis, render
    from specmon.sources.logfiles import LogFileError

    if args.baseline and args.baseline_tps is not None:
        return fail("give either --baseline FILE or --baseline-tps X, not both")
    try:
        session = ingest_files(args.files, baseline=args.baseline, warmup=args.warmup,
                               jobs=args.jobs, year=args.year)
    except LogFileError as exc:
        return fail(str(exc))
    samples = sum(session.counts.get(k, 0) for k in ("decode", "engine_stats", "spec"))
    analysis = analyze(session.runs, baseline_tps=args.baseline_tps, launch_cv=args.launch_cv)
    if samples == 0 and analysis.crashes:
        # Nothing to summarise, but something to say: the server died before its first stats line.
        c = analysis.crashes[-1]
        where = f" (line {c.line} of {c.source}, run {c.run}: {c.label})" if c.line is not None else ""
        more = f"; {len(analysis.crashes) - 1} earlier crash(es) too" if len(analysis.crashes) > 1 else ""
        return fail(f"the server crashed at {c.clock}{where}: {c.error}{more} — "
                     "no speculative-decoding lines before it", EXIT_NOTHING)
    if samples == 0:
        unparsed = session.counts.get("unparsed", 0)
        extra = f" ({unparsed} line(s) had a known marker but could not be parsed)" if unparsed else ""
        return fail(f"no speculative-decoding lines found in {', '.join(args.files)}{extra}: "
                     "expected SGLang 'Decode batch', vLLM 'Engine 000: Avg prompt throughput' / "
                     "'SpecDecoding metrics', or llama.cpp 'draft acceptance' lines", EXIT_NOTHING)
    if args.format == "table":
        from rich.console import Console  # the table only (45 ms to import)
        from rich.markup import escape

        from specmon.literal import plain

        console = Console()
        if not console.is_terminal:
            console.width = max(console.width, 110)  # piped: no terminal to fit, keep rows whole
        # The table fits the terminal (columns dropped with a note) and the verdict wraps at words.
        print_analysis(console, analysis, title=f"specmon summary — {session.lines} lines, "
                                                f"engine {session.engine.value}")
        if analysis.verdict.concurrency_note:
            console.print(f"[yellow]Note:[/] {escape(plain(analysis.verdict.concurrency_note))}")
        for text in crash_lines(analysis):
            console.print(f"[bold red]Crash:[/] {escape(plain(text))}")
        if session.counts.get("unparsed"):
            console.print(f"[yellow]{session.counts['unparsed']} line(s) with a known marker could not be "
                          f"parsed[/] (see --format json → unparsed_examples)")
    else:
        sys.stdout.write(render(args.format, session, analysis))
    return EXIT_OK


# -- parse ---------------------------------------------------------------------------------------

def cmd_parse(args: argparse.Namespace) -> int:
    """``specmon parse FILE...``: every record as one JSON object per line."""
    from specmon.ingest.files import log_clock
    from specmon.parsing import LineParser, detect_engine
    from specmon.sources.logfiles import LogFileError, check_readable, head_lines, iter_line_batches

    try:
        for path in args.files:
            check_readable(path)
    except LogFileError as exc:
        return fail(str(exc))
    out = sys.stdout
    try:
        for path in args.files:
            head = head_lines(path)
            clock = log_clock(path, head, args.year)
            parser = LineParser(year=clock.year, engine=detect_engine(head), day=clock.day)
            fix = clock.rollover().fix
            n = 0
            for batch in iter_line_batches(path):
                for text in batch:
                    n += 1
                    rec = parser.parse(text, n)
                    if rec is not None:
                        rec.timestamp = fix(rec.timestamp)
                        d = rec.to_json()
                        d["file"] = path  # always: one schema whether one file or several
                        out.write(json.dumps(d, ensure_ascii=False) + "\n")
    except LogFileError as exc:
        return fail(str(exc))
    except BrokenPipeError:  # `specmon parse x | head`
        sys.stderr.close()
    return EXIT_OK


# -- parser ----------------------------------------------------------------------------------------

_YEAR_HELP = ("the year of stamps printed without one (vLLM's MM-DD, time-only prefixes); default: "
              "the year of the log's first dated line, else of the file's modification time")


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors are the one clear sentence and where to look, not a usage block first.

    argparse printed the whole usage (up to 15 lines for ``sweep``) before the sentence, which a
    newcomer then had to find at the bottom. Subcommand parsers are made of this class too.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: {_suggesting(message)} (see `{self.prog} --help`)\n")


#: argparse's sentence for a word outside a fixed list (a command, a --format, a --strategy).
_INVALID_CHOICE = re.compile(r"^(?P<head>.*)invalid choice: '(?P<given>.*)' \(choose from (?P<choices>.*)\)$", re.S)


def _suggesting(message: str) -> str:
    """argparse's "invalid choice" sentence with the nearest valid words first (``summarise``: summarize).

    Other messages are returned as they are. The valid list stays, so a word with no near match
    still shows what is accepted.
    """
    m = _INVALID_CHOICE.match(message)
    if m is None:
        return message
    choices = re.findall(r"'([^']*)'", m.group("choices"))
    given = m.group("given")
    from specmon.suggest import close_words

    near = close_words(given, choices)
    head = f"{m.group('head')}invalid choice: {given!r}"
    listed = ", ".join(choices)
    if near:
        return f"{head}: did you mean {' or '.join(near)}? (valid: {listed})"
    return f"{head} (valid: {listed})"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    from specmon.output.tables import FORMATS

    p = _Parser(
        prog="specmon",
        description="Tune speculative decoding on live LLM inference servers (SGLang, vLLM, llama.cpp).",
    )
    p.add_argument("--version", action="version", version=f"specmon {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("summarize", help="per-configuration table from logs, no UI",
                       description="Read logs and print one row per speculative configuration with "
                                   "honest statistics, the baseline comparison and a verdict.")
    s.add_argument("files", nargs="+", metavar="FILE")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--baseline", metavar="FILE", action="append", default=[],
                   help="a log of the server without speculation, used as the baseline")
    g.add_argument("--baseline-tps", type=positive_float, metavar="X",
                   help="a known baseline throughput in tokens/s (e.g. 88.8)")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.add_argument("--warmup", type=whole_number, default=None, metavar="N",
                   help="samples excluded at the start of each run, per rank "
                        "(default: 5 SGLang decode lines, 1 vLLM interval)")
    s.add_argument("--jobs", type=whole_number, default=0, metavar="N",
                   help="parallel parsing processes for large files (default: one per core; 1 = none)")
    s.add_argument("--year", type=year_arg, default=None, metavar="YYYY", help=_YEAR_HELP)
    s.add_argument("--launch-cv", type=launch_cv_pct, default=0.05, metavar="PCT", help=LAUNCH_CV_HELP)
    s.set_defaults(func=cmd_summarize)

    pr = sub.add_parser("parse", help="print every parsed record as JSON lines",
                        description="Print one JSON object per parsed record, in input order.")
    pr.add_argument("files", nargs="+", metavar="FILE")
    pr.add_argument("--year", type=year_arg, default=None, metavar="YYYY", help=_YEAR_HELP)
    pr.set_defaults(func=cmd_parse)

    # Interactive and remote commands live beside their subsystems; each module adds its own.
    import importlib
    import importlib.util

    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(sub)
    for name, command in sub.choices.items():
        if name == "sweep":
            continue  # its own hidden --read-only refuses with a sentence (commands/control.py)
        # Listed only where it means something: the commands that can restart, drive load or write an
        # export. summarize and parse never act (accepted, not offered); the demo refuses it with a
        # sentence that points to replay, so it is parsed there but not listed as an option that works.
        command.add_argument("--read-only", action="store_true",
                             help=argparse.SUPPRESS if name in READ_ONLY_MEANS_NOTHING else
                             "never restart, sweep, drive load or write an export: watch only "
                             "(refused where the action runs, not only hidden)")
    return p


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def _near_options(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """``: did you mean --steps?`` for a mistyped option (``--stps``); "" when none is near."""
    from specmon.suggest import close_words

    known = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    near = [w for word in extra if word.startswith("--") for w in close_words(word.split("=", 1)[0], known, n=1)]
    return f": did you mean {' or '.join(dict.fromkeys(near))}?" if near else ""


#: Modules that add subcommands with a ``register(subparsers)`` function (imported lazily:
#: ``summarize`` must not pay for Textual's import).
#: Commands where --read-only is accepted but not offered: they never act (summarize, parse), or they
#: only act, and refuse it (demo; sweep has its own).
READ_ONLY_MEANS_NOTHING = ("summarize", "parse", "demo")

COMMAND_MODULES = ("specmon.commands.dashboard", "specmon.commands.remote", "specmon.commands.control",
                   "specmon.commands.demo")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    # Building the parser imports the commands' modules (numpy, the model): 40-odd collection
    # passes over objects that live as long as the process (7-10 ms of a 0.45 s summarize;
    # 1.2 ms so). None runs while they are made, and they are frozen out of later passes' way
    # for as long as the command runs (only pausing it, the pass that followed walked them all
    # again); a caller in the same process, such as the tests, gets its collector back.
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = build_parser()
        gc.freeze()
    except KeyboardInterrupt:  # ^C while the modules load (0.1 s): no traceback either
        return 130
    finally:
        if collecting:
            gc.enable()
    try:
        return _run(parser, argv)
    finally:
        gc.unfreeze()


def run() -> NoReturn:
    """The process's entry point (the ``specmon`` script, ``python -m specmon``): :func:`main`, then exit.

    After a dashboard (``demo``, ``watch``, ``connect``) the process leaves at once once the
    command has cleaned up (:func:`specmon.commands.terminal.leave_process`): nothing left
    behind can hold it. Tests call :func:`main` in-process instead.
    """
    code = main()
    from specmon.commands import terminal

    if terminal.leave_at_once:
        terminal.leave_process(code)
    raise SystemExit(code)


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand that was given them, with its --help (argparse: the top one's)
        chosen = _subparser(parser, getattr(args, "command", None))
        chosen.error(f"unrecognized arguments: {' '.join(extra)}{_near_options(chosen, extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INPUT
    # The words as typed: advice that names a command to run again (a stopped sweep) repeats them.
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if getattr(args, "read_only", False):
        from specmon.control.guard import set_read_only

        set_read_only("--read-only")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
