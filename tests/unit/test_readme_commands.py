"""Every command the README shows runs as written after the README's own install (issue 42, item 8).

The commands are read from the README's ``bash`` blocks, not copied here: a command added there is
checked here. Each runs as a user would type it, with ``.venv/bin/specmon`` (a bare ``specmon`` is
not on the PATH after ``pip install`` into a venv: "command not found"):

- the demo and ``replay`` in a pseudo-terminal, until the dashboard is drawn, then ended as the
  tour says (``q``; the demo by SIGTERM, which ends it like ``q`` and stops its server);
- ``summarize`` on the bundled logs: exit 0 and its table;
- ``connect`` to the README's example hosts, which do not exist here: it must answer at once with
  exit 2 and one sentence naming what is missing (no traceback, no dashboard waiting for ever);
- every subcommand of the Commands table: ``--help`` exits 0;
- the install and test commands: the ones ``.ci/run`` runs (the user's install is CI's without
  the test extras).
"""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.ptyproc import PtyProcess

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def bash_commands() -> list[str]:
    """Every command line of the README's ``bash`` blocks, a trailing ``  # comment`` removed."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s{2,}#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


COMMANDS = bash_commands()
SPECMON = [c for c in COMMANDS if c.startswith(".venv/bin/specmon ")]

pytestmark = pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "specmon").exists(),
                                reason="the README's install (.venv in the project folder) is not there")


def specmon_binary() -> str:
    """``.venv/bin/specmon`` as the README's install makes it (this test runs in that venv)."""
    return str(ROOT / ".venv" / "bin" / "specmon")


def argv_of(command: str) -> list[str]:
    """The README's line run by bash in the project folder, as typed (its globs and quotes are the shell's)."""
    assert shlex.split(command)[0] == ".venv/bin/specmon", command
    return ["bash", "-c", f"exec {command}"]


def isolated(tmp_path: Path) -> dict[str, str]:
    """A user's fresh environment: specmon's folders (recordings, config, state) in the test's own."""
    return {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path)}


class Typed(PtyProcess):
    """A README command line, exactly as written, on a new 80x24 pty (PtyProcess runs ``python -m specmon``)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        full = {**env, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full, cwd=ROOT,
                                     start_new_session=True)
        os.close(slave)
        self.master = master
        self._chunks = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def press(self, key: str) -> None:
        assert self.master is not None
        os.write(self.master, key.encode())


def test_the_readme_shows_commands_and_none_with_a_bare_specmon() -> None:
    assert len(SPECMON) >= 6, COMMANDS
    bare = [c for c in COMMANDS if re.match(r"(\S+ )?specmon\b", c) and not c.startswith(".venv/bin/specmon")]
    assert not bare, f"not on the PATH after the README's install: {bare}"
    for command in COMMANDS:
        first = shlex.split(command)[0]
        assert first in ("python3", ".venv/bin/specmon", ".venv/bin/python"), command


def test_the_install_and_test_commands_are_the_ones_ci_runs() -> None:
    ci = " ".join(CI.replace("\\\n", " ").split())
    ci_install = re.search(r"python3 -m venv \.venv && \.venv/bin/pip install -q -e '\.\[dev\]'", ci)
    assert ci_install, "the CI's install line moved: update this test with it"
    installs = [c for c in COMMANDS if c.startswith("python3 -m venv")]
    assert len(installs) == 2, installs
    user, dev = (installs if "'.[dev]'" not in installs[0] else installs[::-1])
    assert dev.startswith(ci_install.group(0) + " && ")
    # The user's install is the CI's without the test extras, then the demo.
    assert user == ci_install.group(0).replace("'.[dev]'", ".") + " && .venv/bin/specmon demo"
    tests = dev.split(" && ", 2)[2]
    assert tests in ci  # the suite exactly as CI runs it
    real = next(c for c in COMMANDS if "-m realserver" in c)
    ci_real = next(line for line in CI.splitlines() if "-m realserver" in line and "pytest" in line)
    assert set(shlex.split(real)) <= set(shlex.split(ci_real.replace("CI=true ", "")))


def test_every_subcommand_of_the_commands_table_has_its_help(tmp_path: Path) -> None:
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = sorted({m for m in re.findall(r"^\| `specmon (\w+)", table, re.M)})
    assert {"demo", "connect", "watch", "replay", "summarize", "parse", "sweep", "report"} <= set(named)
    for sub in named:
        done = subprocess.run([specmon_binary(), sub, "--help"], capture_output=True, text=True, timeout=60,
                              cwd=ROOT, env=isolated(tmp_path))
        assert done.returncode == 0 and f"usage: specmon {sub}" in done.stdout, (sub, done.stderr)


@pytest.mark.parametrize("command", [c for c in SPECMON if c.split()[1] == "summarize"])
def test_summarize_runs_as_written(command: str, tmp_path: Path) -> None:
    done = subprocess.run(argv_of(command), capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=isolated(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "tok/s" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [c for c in SPECMON if c.split()[1] == "connect"])
def test_connect_to_the_example_hosts_answers_at_once(command: str, tmp_path: Path) -> None:
    """gpu-box, bastion and the profile kimi do not exist here: one sentence and exit 2, within 10 s."""
    started = time.monotonic()
    p = Typed(argv_of(command), isolated(tmp_path))
    try:
        code = p.wait_exit(bound_s=30)
        took = time.monotonic() - started
        out = p.final_output()
    finally:
        p.kill()
    assert code == 2, out[-2000:]
    assert took < 10
    assert "Traceback" not in out
    said = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", "", out)
    assert re.search(r"'(gpu-box|bastion)' (does not resolve|could not be resolved)|'kimi'|which log\?", said), said[-2000:]


def dashboard_drawn(p: Typed) -> bool:
    return "throughput" in p.output and "accept" in p.output


@pytest.mark.parametrize("command", [c for c in SPECMON if c.split()[1] == "replay"])
def test_replay_runs_as_written_and_q_quits(command: str, tmp_path: Path) -> None:
    p = Typed(argv_of(command), isolated(tmp_path))
    try:
        p.wait_until(lambda: dashboard_drawn(p), "the dashboard", bound_s=60)
        p.press("q")
        assert p.wait_exit(bound_s=30) == 0
    finally:
        p.kill()


def test_the_one_command_s_demo_runs_as_written(tmp_path: Path) -> None:
    """The first screen's command, after its install: the demo draws the dashboard; SIGTERM ends it like q."""
    user = next(c for c in COMMANDS if c.startswith("python3 -m venv") and "'.[dev]'" not in c)
    demo = user.split(" && ")[-1]
    assert demo == ".venv/bin/specmon demo"
    p = Typed(argv_of(demo), isolated(tmp_path))
    try:
        p.wait_until(lambda: dashboard_drawn(p), "the demo's dashboard", bound_s=60)
        p.proc.send_signal(signal.SIGTERM)
        assert p.wait_exit(bound_s=60) == 128 + signal.SIGTERM
    finally:
        p.kill()
    assert "Traceback" not in p.final_output()
