"""``specmon connect`` end to end: options and profiles, refusals on stderr, a real sshd dropped mid-stream.

No mocks of asyncssh: the SSH tests run against the in-process asyncssh server
or Debian's OpenSSH sshd on 127.0.0.1 (tests/support/sshd.py), with HOME in a temp dir.
Failures at start-up are checked on the real command (a subprocess running the
app headless); the dashboard itself runs in-process under Textual's Pilot.
Waits are bounded polls that turn a hang into a failure; nothing asserts timing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

import asyncssh
import pytest

from specmon.cli import build_parser, main
from specmon.commands.remote import ConnectError, connect_app, plan_connect
from specmon.sources.base import ConnectionState
from tests.support.app_factory import ROOT, header_text, options, wait_for
from tests.support.logtext import decode, ready, server_args
from tests.support.sshd import (
    AsyncSSHServer,
    ClientHome,
    OpenSSHServer,
    start_asyncssh_server,
)


def parse(*argv: str):  # type: ignore[no-untyped-def]
    """The ``connect`` options as the command line parses them."""
    return build_parser().parse_args(["connect", *argv])


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- options, profiles and what is refused before connecting -------------------------------------


def test_options_reach_the_ssh_target(client_home: ClientHome) -> None:
    plan = plan_connect(parse("alice@gpu-box:2200", "--log", "/data/s.log", "-p", "2222", "-i", "~/k",
                              "-J", "bastion", "--lines", "50"))
    target = plan.source.target
    assert (target.user, target.host, target.port, target.jump) == ("alice", "gpu-box", 2222, "bastion")
    assert target.identity == (str(client_home.path / "k"),)
    assert plan.source.path == "/data/s.log"
    assert plan.source.name == "alice@gpu-box:2222:/data/s.log"


@pytest.mark.parametrize("argv, message", [
    (["gpu-box"], "which log? pass it: specmon connect gpu-box --log /path/to/server.log"),
    ([], "which host? pass it: specmon connect [USER@]HOST[:PORT] --log"),
    (["ops@-gpu", "--log", "/x"], "host must not start with '-'"),
    (["gpu-box", "--log", "/x\n/y"], "invalid log path"),
    (["gpu-box", "--log", "/x", "--theme", "nope"], "unknown theme 'nope'"),
    (["gpu-box", "--log", "/x", "--config", "/nonexistent/specmon.toml"],
     "/nonexistent/specmon.toml: config file not found"),
])
def test_input_errors_exit_2_with_one_message(client_home: ClientHome, capsys: pytest.CaptureFixture[str],
                                              argv: list[str], message: str) -> None:
    assert main(["connect", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("specmon: ") and err.count("\n") == 1 and "Traceback" not in err


def test_bad_port_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse("gpu-box", "-p", "70000")
    assert info.value.code == 2
    assert "not a port" in capsys.readouterr().err


def test_profile_by_name_and_overrides(client_home: ClientHome, tmp_path: Path) -> None:
    config = write_config(tmp_path / "specmon.toml", """
default_profile = "kimi"

[profiles.kimi]
host = "ops@gpu-box"
port = 2200
log = "/data/logs/sglang.log"
baseline_tps = 88.8
jump = "bastion"

[profiles.glob]
host = "gpu-box"
log_glob = "~/logs/sglang-*.log"
lines = 200
""")
    # `specmon connect PROFILE`
    plan = plan_connect(parse("kimi", "--config", str(config)))
    t = plan.source.target
    assert (t.user, t.host, t.port, t.jump) == ("ops", "gpu-box", 2200, "bastion")
    assert plan.source.path == "/data/logs/sglang.log" and plan.baseline_tps == 88.8
    # No argument: the default profile.
    assert plan_connect(parse("--config", str(config))).source.name == "ops@gpu-box:2200:/data/logs/sglang.log"
    # Options win over the profile.
    plan = plan_connect(parse("kimi", "--config", str(config), "-p", "22", "--log", "/tmp/other.log",
                              "--baseline-tps", "90"))
    assert plan.source.target.port == 22 and plan.source.path == "/tmp/other.log" and plan.baseline_tps == 90
    # --profile NAME with an explicit host: the host is the destination, the profile fills the rest.
    plan = plan_connect(parse("root@other", "--profile", "kimi", "--config", str(config)))
    assert (plan.source.target.user, plan.source.target.host) == ("root", "other")
    assert plan.source.path == "/data/logs/sglang.log"
    # A profile with only a glob: the source finds the newest match when it connects.
    plan = plan_connect(parse("glob", "--config", str(config)))
    assert plan.source.path is None and plan.source.log_glob == "~/logs/sglang-*.log"


@pytest.mark.parametrize("text, message", [
    ('[profiles.kimi]\nhots = "gpu-box"\n', "specmon.toml:2: profiles.kimi.hots: unknown key 'hots'"),
    ('[profiles.kimi]\nhost = "gpu-box"\nport = 0\n', "specmon.toml:3: profiles.kimi.port"),
    ('[profiles.kimi\nhost = "gpu-box"\n', "invalid TOML"),
])
def test_bad_config_is_refused_with_its_line(client_home: ClientHome, tmp_path: Path, text: str,
                                             message: str) -> None:
    config = write_config(tmp_path / "specmon.toml", text)
    with pytest.raises(ConnectError, match=message.replace(".", r"\.").replace("[", r"\[")):
        plan_connect(parse("kimi", "--config", str(config)))


def test_unknown_profile_lists_the_known_ones(client_home: ClientHome, tmp_path: Path) -> None:
    config = write_config(tmp_path / "specmon.toml", '[profiles.kimi]\nhost = "gpu-box"\nlog = "/x"\n')
    with pytest.raises(ConnectError, match=r"unknown profile 'qwen' \(known: kimi\)"):
        plan_connect(parse("gpu-box", "--profile", "qwen", "--config", str(config)))
    # A profile without a host is a server on this machine: planned locally, not refused.
    config = write_config(tmp_path / "specmon.toml", '[profiles.kimi]\nlog = "/x"\n')
    plan = plan_connect(parse("kimi", "--config", str(config)))
    assert plan.local and str(plan.source.path) == "/x"


def test_missing_baseline_file_of_the_profile(client_home: ClientHome, tmp_path: Path) -> None:
    config = write_config(tmp_path / "specmon.toml",
                          '[profiles.kimi]\nhost = "gpu-box"\nlog = "/x"\nbaseline_file = "/nope/base.log"\n')
    with pytest.raises(ConnectError, match="baseline_file: /nope/base.log: no such file"):
        plan_connect(parse("kimi", "--config", str(config)))


# -- refusals on the real command (subprocess, app headless) ------------------------------------


async def run_specmon(home: ClientHome, *argv: str, timeout: float = 90) -> tuple[int, str, str]:
    """Run ``specmon connect ... --headless`` with HOME = the client home; (exit code, stdout, stderr).

    Asynchronous on purpose: the in-process SSH server needs this loop to keep turning.
    """
    env = dict(os.environ, HOME=str(home.path))
    env.pop("SSH_AUTH_SOCK", None)
    env.pop("XDG_CONFIG_HOME", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "specmon", "connect", *argv, "--headless",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        env=env, cwd=ROOT,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()  # by its own handle: only the process this test started
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def assert_one_message(err: str) -> str:
    assert err.startswith("specmon: "), err
    assert "Traceback" not in err
    return err


async def test_unknown_host_exits_2_with_fingerprint_and_keyscan(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    client_home.known_hosts.write_text("")
    code, _, err = await run_specmon(client_home, f"127.0.0.1:{asyncssh_server.port}", "--log", "/x.log")
    assert code == 2
    assert_one_message(err)
    assert "unknown host" in err
    assert asyncssh_server.host_key.get_fingerprint() in err
    assert (f"ssh-keyscan -t ed25519 -p {asyncssh_server.port} 127.0.0.1 >> {client_home.known_hosts}"
            in err)
    assert asyncssh_server.authenticated == 0  # nothing was sent to an unverified host


async def test_changed_host_key_exits_2_loudly(asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    client_home.known_hosts.write_text("")
    client_home.trust(asyncssh_server.known_hosts_pattern, asyncssh.generate_private_key("ssh-ed25519"))
    code, _, err = await run_specmon(client_home, f"127.0.0.1:{asyncssh_server.port}", "--log", "/x.log")
    assert code == 2
    assert "HAS CHANGED" in assert_one_message(err) and "ssh-keygen -R" in err
    assert asyncssh_server.authenticated == 0


async def test_known_hosts_none_is_refused(asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    client_home.write_config("Host *\n    UserKnownHostsFile none\n")
    code, _, err = await run_specmon(client_home, f"127.0.0.1:{asyncssh_server.port}", "--log", "/x.log")
    assert code == 2
    assert "UserKnownHostsFile none" in assert_one_message(err)
    assert asyncssh_server.accepted == 0


async def test_refused_key_exits_2(client_home: ClientHome, tmp_path: Path) -> None:
    server = await start_asyncssh_server(client_home, tmp_path, authorized=[asyncssh.generate_private_key("ssh-ed25519")])
    client_home.trust(server.known_hosts_pattern, server.host_key)
    try:
        code, _, err = await run_specmon(client_home, f"127.0.0.1:{server.port}", "--log", "/x.log")
    finally:
        await server.stop()
    assert code == 2
    assert "authentication failed" in assert_one_message(err) and "~/.ssh/id_ed25519" in err


async def test_profile_glob_without_match_exits_2_saying_what_to_pass(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "specmon.toml",
                          f'[profiles.lab]\nhost = "127.0.0.1"\nport = {asyncssh_server.port}\n'
                          'log_glob = "logs/sglang-*.log"\n')
    code, _, err = await run_specmon(client_home, "lab", "--config", str(config))
    assert code == 2
    assert "no file on 127.0.0.1" in assert_one_message(err)
    assert "--log /path/to/server.log" in err


# -- the dashboard on a real connection ----------------------------------------------------------


def numbered_decode(seq: int) -> str:
    """An SGLang decode line whose throughput is its sequence number (1000 + seq): each line unique."""
    return decode(10 + seq, 1000.0 + seq, 2.5, 0.5)


def log_head(count: int) -> str:
    lines = [server_args(2, 0), ready(5)] + [numbered_decode(i) for i in range(count)]
    return "".join(line + "\n" for line in lines)


async def test_profile_glob_picks_the_newest_log_and_fills_the_dashboard(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    logs = asyncssh_server.workdir / "logs"
    logs.mkdir()
    (logs / "sglang-old.log").write_text("stale\n")
    os.utime(logs / "sglang-old.log", (1_000_000, 1_000_000))
    (logs / "sglang-new.log").write_text(log_head(30))
    config = write_config(tmp_path / "specmon.toml",
                          f'[profiles.lab]\nhost = "127.0.0.1"\nport = {asyncssh_server.port}\n'
                          'log_glob = "logs/sglang-*.log"\nbaseline_tps = 900\n')
    plan = plan_connect(parse("lab", "--config", str(config)))
    app = connect_app(plan, options=options(baseline_tps=plan.baseline_tps, warmup=1), user_themes=None)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.feeder.session.counts["decode"] == 30, "the history", rounds=1500)
        app.refresh_now()
        await pilot.pause()
        text = header_text(app)
        assert "127.0.0.1:" in text and "logs/sglang-new.log" in text
        assert "live" in text and "EAGLE3 · 2 steps" in text
        events = [e.text for e in app.feeder.session.events]
        assert any("newest file matching 'logs/sglang-*.log'" in e for e in events)
        # The exact command run on the host is shown before it runs.
        assert any(e.startswith("running on 127.0.0.1:") and "exec sh -c <remote_tail.sh>" in e for e in events)
        assert app.feeder.session.current.throughput.tolist() == [1000.0 + i for i in range(1, 30)]


class Writer(threading.Thread):
    """Appends numbered decode lines to a log, a few at a time, like a busy server."""

    def __init__(self, path: Path, start: int, count: int, per_write: int = 5) -> None:
        super().__init__(daemon=True)
        self.path, self.first, self.count, self.per_write = path, start, count, per_write
        self.written = 0
        self.stop_now = threading.Event()

    def run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            for seq in range(self.first, self.first + self.count):
                if self.stop_now.is_set():
                    return
                f.write(numbered_decode(seq) + "\n")
                self.written += 1
                if self.written % self.per_write == 0:
                    f.flush()
                    time.sleep(0.002)
            f.flush()


@pytest.mark.sshd
async def test_openssh_drop_mid_stream_every_line_once_in_the_dashboard(
    openssh_server: OpenSSHServer, client_home: ClientHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    log = tmp_path / "server.log"
    history = 40
    log.write_text(log_head(history))
    total = 3000
    plan = plan_connect(parse(f"{openssh_server.user}@127.0.0.1", "-p", str(openssh_server.port),
                              "--log", str(log)))
    source = plan.source
    app = connect_app(plan, options=options(warmup=1), user_themes=None)
    session = lambda: app.feeder.session  # noqa: E731
    # Three stretches of writing; the link is dropped during the first two, while lines are written.
    writers = [Writer(log, history, 1000), Writer(log, history + 1000, 1000),
               Writer(log, history + 2000, total - history - 2000)]
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: session().counts["decode"] == history, "the history", rounds=1500)
            app.refresh_now()
            assert "live" in header_text(app)
            for i, writer in enumerate(writers):
                writer.start()
                if i < 2:
                    seen = writer.first + 300
                    await wait_for(pilot, lambda seen=seen: session().counts["decode"] >= seen, f"{seen} lines", rounds=3000)
                    assert openssh_server.drop() >= 1  # the per-connection sshd, killed by PID
                    await wait_for(pilot, lambda: source.status.state is not ConnectionState.LIVE,
                                   "the drop noticed", rounds=3000)
                    await wait_for(pilot, lambda: source.status.state is ConnectionState.LIVE,
                                   "reconnected", rounds=3000)
                await asyncio.to_thread(writer.join, 60)
                assert writer.written == writer.count
            await wait_for(pilot, lambda: session().counts["decode"] >= total, "every line", rounds=3000)
            await pilot.pause(0.2)  # a duplicate arriving late would show up here
            app.refresh_now()
            await pilot.pause()
            s = session()
            assert s.counts["decode"] == total
            # Each line's throughput is its sequence number: all there, once, in order (warm-up: the first).
            assert s.current.throughput.tolist() == [1000.0 + i for i in range(1, total)]
            assert len(s.runs) == 1
            events = [e.text for e in s.events]
            assert sum(e.startswith(f"resuming {log} at byte ") for e in events) == 2, events
            assert sum(e.startswith("connection lost") for e in events) == 2, events
            text = header_text(app)
            assert "live" in text and f"{s.lines:,} lines" in text
    finally:
        for writer in writers:
            writer.stop_now.set()
            if writer.is_alive():
                writer.join(10)


# -- the real command on a real terminal -----------------------------------------------------------


class Terminal:
    """``specmon`` on a pseudo-terminal of a fixed size: what a user runs, keys and screen included."""

    def __init__(self, argv: list[str], home: ClientHome, size: tuple[int, int] = (120, 36)) -> None:
        import pty

        env = dict(os.environ, HOME=str(home.path), TERM="xterm-256color")
        env.pop("SSH_AUTH_SOCK", None)
        env.pop("XDG_CONFIG_HOME", None)
        cols, rows = size
        pid, fd = pty.fork()
        if pid == 0:  # the child: size the terminal before the app reads it, then become specmon
            try:
                import fcntl
                import struct
                import termios

                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.chdir(ROOT)
                os.execve(sys.executable, [sys.executable, "-m", "specmon", *argv], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.code: int | None = None

    def read(self, seconds: float) -> None:
        """Collect what the app draws for a while."""
        import select

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the app exited and the terminal closed
                    return
                if not data:
                    return
                self.output += data

    def screen_text(self) -> str:
        """The output without escape sequences (each cell's text stays contiguous within a run)."""
        import re

        return re.sub(rb"\x1b\[[0-9;?<>=]*[A-Za-z~]", b"", self.output).decode("utf-8", errors="replace")

    def wait_for(self, text: str, rounds: int = 300) -> None:
        for _ in range(rounds):
            if text in self.screen_text():
                return
            self.read(0.1)
        raise AssertionError(f"never on screen: {text!r}; last output: {self.screen_text()[-2000:]!r}")

    def press(self, key: bytes) -> None:
        os.write(self.fd, key)

    def wait_exit(self, seconds: float = 60) -> int:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.read(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                return self.code
        raise AssertionError("specmon did not exit")

    def close(self) -> None:
        if self.code is None:
            try:
                os.kill(self.pid, 9)  # the PID this test started, nothing else
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.mark.sshd
def test_specmon_connect_on_a_terminal_fills_live_and_quits_with_q(
    openssh_server: OpenSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_text(log_head(20))  # 22 lines
    term = Terminal(["connect", f"{openssh_server.user}@127.0.0.1", "-p", str(openssh_server.port),
                     "--log", str(log)], client_home)
    try:
        term.wait_for("22 lines")
        term.wait_for("EAGLE3")  # the configuration, read from the remote log
        term.wait_for("/server.log")  # the source (a long temp path is cut from the left)
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(numbered_decode(i) + "\n" for i in range(20, 50)))
        term.wait_for("52 lines")  # the new lines arrive while the dashboard runs
        term.wait_for("source: live")
        term.press(b"q")
        assert term.wait_exit() == 0
    finally:
        term.close()
