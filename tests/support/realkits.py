"""The real-server kits of ``shared/`` (vLLM's CPU build, llama.cpp's ``llama-server``, SGLang's CPU engine) for tests.

Where things are, never as an absolute path of this machine:

* the kits: ``$SPECMON_SHARED``, else ``shared/`` beside the project (``../shared``
  from the project root, as CI clones it);
* the vLLM venv and model: ``$VLLM_VENV`` / ``$VLLM_MODEL`` (the kit's defaults
  ``/tmp/vllmenv`` and ``/tmp/tinyllama``);
* llama.cpp's build: ``$LLAMA_PREFIX`` (the kit's default ``/tmp/llamacpp``);
* the SGLang venv and models: ``$SGLANG_VENV`` / ``$SGLANG_MODEL`` (the kit's defaults
  ``/tmp/sglangenv`` and ``/tmp/sglangmodel``, drafts beside it: ``-eagle3``, ``-draft``).

A missing kit skips the test with the command that installs it, except under
``CI=true``, where it fails: CI installs the kits, so a missing one is a broken CI.
Servers listen on ports 18100-18199 (another helper's servers use 18200-18299).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from specmon.control.launch import LaunchProfile

PROJECT = Path(__file__).resolve().parents[2]
PORTS = range(18100, 18200)

#: Every variable the vLLM kit's serve.sh sets to keep vLLM on the loopback and offline,
#: plus statistics every second (vLLM logs them every 10 s by default) so samples come fast.
VLLM_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
            "VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOG_STATS_INTERVAL": "1"}


def shared_dir() -> Path:
    """``$SPECMON_SHARED`` or ``shared/`` beside the project."""
    env = os.environ.get("SPECMON_SHARED")
    return Path(env) if env else PROJECT.parent / "shared"


def vllm_venv() -> Path:
    return Path(os.environ.get("VLLM_VENV", "/tmp/vllmenv"))


def vllm_model() -> Path:
    return Path(os.environ.get("VLLM_MODEL", "/tmp/tinyllama"))


def llama_prefix() -> Path:
    return Path(os.environ.get("LLAMA_PREFIX", "/tmp/llamacpp"))


def sglang_venv() -> Path:
    return Path(os.environ.get("SGLANG_VENV", "/tmp/sglangenv"))


def sglang_model() -> Path:
    return Path(os.environ.get("SGLANG_MODEL", "/tmp/sglangmodel"))


def require(missing: str | None) -> None:
    """Skip (or, under CI=true, fail) when a kit is missing; ``missing`` says what and how to install it."""
    if missing is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must install the real-server kits first: {missing}")
    pytest.skip(missing)


def vllm_missing() -> str | None:
    kit = shared_dir() / "real_server"
    if not (kit / "load_gen.py").exists():
        return f"no vLLM kit at {kit} (set SPECMON_SHARED to the folder holding real_server/)"
    if not (vllm_venv() / "bin" / "vllm").exists():
        return f"the vLLM kit is not installed: no {vllm_venv() / 'bin' / 'vllm'} (run {kit / 'setup.sh'})"
    if not vllm_model().is_dir():
        return f"the model is missing: no {vllm_model()} (run {kit / 'setup.sh'})"
    return None


def llama_missing() -> str | None:
    kit = shared_dir() / "real_server_llamacpp"
    if not (kit / "load_gen.py").exists():
        return f"no llama.cpp kit at {kit} (set SPECMON_SHARED to the folder holding real_server_llamacpp/)"
    prefix = llama_prefix()
    for path in (prefix / "bin" / "llama-server", prefix / "models" / "tiny-f16.gguf",
                 prefix / "models" / "tiny-draft-f16.gguf"):
        if not path.exists():
            return f"the llama.cpp kit is not built: no {path} (run {kit / 'setup.sh'} {prefix})"
    return None


def sglang_missing() -> str | None:
    kit = shared_dir() / "real_server_sglang"
    if not (kit / "load_gen.py").exists():
        return f"no SGLang kit at {kit} (set SPECMON_SHARED to the folder holding real_server_sglang/)"
    venv, model = sglang_venv(), sglang_model()
    for path in (venv / "bin" / "sglang", model / "config.json", Path(f"{model}-eagle3") / "config.json"):
        if not path.exists():
            return f"the SGLang kit is not installed: no {path} (run {kit / 'setup.sh'})"
    return None


#: The counters tests' servers (another helper's range: they can run at the same time).
COUNTERS_PORTS = range(18350, 18400)


def free_port(ports: range = PORTS) -> int:
    """A port of ``ports`` (default 18100-18199) nobody listens on now."""
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {ports.start}-{ports.stop - 1}")


# --------------------------------------------------------------------------- launch profiles


#: vLLM is ready in 25-40 s on an idle 2-core machine; at a load average of 30 it took 529 s
#: (measured): the bounds only turn a hang into a failure.
def vllm_profile(folder: Path, port: int, *, env: dict[str, str] | None = None,
                 ready_marker: str = "Application startup complete", start_timeout_s: int = 900,
                 eager: bool = False, max_model_len: int = 1024) -> LaunchProfile:
    """A managed vLLM launch: n-gram speculation with ``{steps}`` tokens, logs and pidfile in ``folder``.

    ``max_model_len`` past the tiny model's 2,048 positions is refused by vLLM's own config check
    on any machine (a start that fails by itself, whatever memory the machine has).

    ``eager``: ``--enforce-eager``, no torch.compile warm-up (95 s of a start at load 15, and the
    tests' own HOME has no compile cache): for tests that measure, not the start-up phases.
    """
    common = [str(vllm_venv() / "bin" / "vllm"), "serve", str(vllm_model()), "--host", "127.0.0.1",
              "--port", "{port}", "--max-model-len", str(max_model_len), *(["--enforce-eager"] if eager else [])]
    return LaunchProfile(
        mode="managed", engine="vllm",
        argv=[*common, "--speculative-config",
              '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": 4}'],
        nospec_argv=common, env=VLLM_ENV if env is None else env, log=str(folder / "vllm_{steps}.log"),
        pidfile=str(folder / "vllm.pid"), port=port, steps_min=0, steps_max=8, ready_marker=ready_marker,
        health_url=f"http://127.0.0.1:{port}/health", start_timeout_s=start_timeout_s, stop_grace_s=60,
    )


def llama_profile(folder: Path, port: int, *, ready_marker: str = "llama_server: listening on") -> LaunchProfile:
    """The llama.cpp kit's server with a draft model, ``--spec-draft-n-max {steps}`` (docs/llamacpp.md).

    ``-lv 4``: at 3, llama.cpp does not log its speculative set-up, so runs would be unlabelled.
    """
    prefix = llama_prefix()
    common = [str(prefix / "bin" / "llama-server"), "-m", str(prefix / "models" / "tiny-f16.gguf"),
              "--host", "127.0.0.1", "--port", "{port}", "-c", "2048", "-np", "2", "-t", "1", "-tb", "1",
              "--no-webui", "--metrics", "--log-colors", "off", "--log-prefix", "--log-timestamps", "-lv", "4"]
    return LaunchProfile(
        mode="managed", engine="llamacpp",
        argv=[*common, "-md", str(prefix / "models" / "tiny-draft-f16.gguf"), "--spec-type", "draft-simple",
              "--spec-draft-n-max", "{steps}", "--spec-draft-n-min", "0", "-td", "1", "-tbd", "1"],
        nospec_argv=common, log=str(folder / "llama_{steps}.log"), pidfile=str(folder / "llama.pid"),
        port=port, steps_min=0, steps_max=16, ready_marker=ready_marker,
        health_url=f"http://127.0.0.1:{port}/health", start_timeout_s=120, stop_grace_s=60,
    )


#: What the SGLang kit's serve.sh sets: the CPU engine (without it SGLang looks for CUDA), offline,
#: one OpenMP thread a process (2 cores shared by the launcher, scheduler and tests).
SGLANG_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1",
              "OMP_NUM_THREADS": "1"}
SGLANG_READY = "The server is fired up and ready to roll!"


def sglang_args(port: int | str, model: Path | None = None) -> list[str]:
    """The kit's serve.sh arguments without speculation: ``--device cpu`` and the intel_amx prefill and
    decode attention backends (on a CPU without AMX SGLang rewrites its default to torch_native, which
    cannot speculate; the split flags keep intel_amx: the kit's NOTES.md), a decode line every 10 steps."""
    return ["--model-path", str(model or sglang_model()), "--device", "cpu", "--host", "127.0.0.1",
            "--port", str(port), "--prefill-attention-backend", "intel_amx", "--decode-attention-backend",
            "intel_amx", "--disable-overlap-schedule", "--max-total-tokens", "8192", "--enable-metrics",
            "--decode-log-interval", "10"]


def sglang_eagle3_args(steps: int | str, draft_tokens: int | str, topk: int | str = 1,
                       draft: str | None = None) -> list[str]:
    """EAGLE-3 with the kit's draft: steps, top-k and draft tokens (SGLang takes them together)."""
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft or f"{sglang_model()}-eagle3",
            "--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
            "--speculative-num-draft-tokens", str(draft_tokens)]


#: SGLang starts in 28-35 s on 2 idle cores and took 250 s at a load average of 12 (the kit's
#: NOTES.md): the bounds only turn a hang into a failure.
def sglang_profile(folder: Path, port: int, *, draft: str | None = None, start_timeout_s: int = 600) -> LaunchProfile:
    """A managed SGLang launch (``python -m sglang.launch_server``): EAGLE-3 with ``{steps}`` steps,
    top-k 1, ``{draft_tokens}`` = steps+1; logs and pidfile in ``folder``. ``draft``: the draft model
    path template (may hold ``{steps}``); default the kit's EAGLE-3 draft."""
    common = [str(sglang_venv() / "bin" / "python"), "-m", "sglang.launch_server", *sglang_args("{port}")]
    return LaunchProfile(
        mode="managed", engine="sglang",
        argv=[*common, *sglang_eagle3_args("{steps}", "{draft_tokens}", "{topk}", draft)],
        nospec_argv=common, env=SGLANG_ENV, log=str(folder / "sglang_{steps}.log"),
        pidfile=str(folder / "sglang.pid"), port=port, steps_min=0, steps_max=8, ready_marker=SGLANG_READY,
        health_url=f"http://127.0.0.1:{port}/health", start_timeout_s=start_timeout_s, stop_grace_s=60,
    )


def group_alive(pgid: int) -> list[int]:
    """The PIDs of the live (not zombie) processes of process group ``pgid``."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            fields = d.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


def stop_group(pid: int, wait_s: float = 60.0) -> None:
    """SIGINT a server that leads its process group (SGLang stops its scheduler and detokenizer
    children itself, in 0.6 s idle), then SIGKILL whatever of the group is left after ``wait_s``."""
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait_s
    while group_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- processes


def server_argv(pidfile: str | None) -> list[str]:
    """The command line of the process a pidfile names (empty when it is gone)."""
    try:
        pid = int(Path(pidfile or "").read_text().split()[0])
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except (OSError, ValueError, IndexError):
        return []


#: Times the kit's load generator is started again when it dies before its duration is up.
LOAD_RESTARTS = 5


class KitLoad:
    """The kit's bounded load generator, completions only (``kit_load.py``), kept running for its ``--duration``.

    The generator asks the server for its model name once, at start, with a 10 s
    timeout, and exits with a traceback if that fails: a server busy right after
    it became ready left a test without load, waiting out its bound for samples
    that could not come. A generator that dies early is started again (at most
    ``LOAD_RESTARTS`` times, for the time that is left); each exit is kept for
    :meth:`describe`, and its output goes to ``out``.
    """

    def __init__(self, kit: Path, port: int, out: Path, args: tuple[str, ...]) -> None:
        self.argv = [sys.executable, str(Path(__file__).with_name("kit_load.py")), str(kit / "load_gen.py"),
                     "--port", str(port)]
        self.args = list(args)
        i = self.args.index("--duration") if "--duration" in self.args else -1
        self.deadline = time.monotonic() + (float(self.args[i + 1]) if i >= 0 else 70.0)
        self.out = out
        self.exits: list[tuple[int, float]] = []  # (exit status, seconds it ran)
        self.proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, daemon=True)
        self._thread.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        args = list(self.args)
        if "--duration" in args:
            args[args.index("--duration") + 1] = f"{max(1.0, self.deadline - time.monotonic()):.0f}"
        with open(self.out, "ab") as sink:
            return subprocess.Popen([*self.argv, *args], stdout=sink, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            proc = self.proc = self._spawn()
            while proc.poll() is None:
                if self._stop.wait(0.5):
                    return
            self.exits.append((proc.returncode, round(time.monotonic() - started, 1)))
            if proc.returncode == 0 or time.monotonic() > self.deadline - 2 or len(self.exits) > LOAD_RESTARTS:
                return
            self._stop.wait(2.0)

    def describe(self) -> str:
        """Whether the load runs, how it ended before, and the end of its output."""
        proc = self.proc
        running = proc is not None and proc.poll() is None
        try:
            tail = self.out.read_text(errors="replace")[-1500:]
        except OSError:
            tail = ""
        return f"load generator {'running' if running else 'not running'}, exits (status, s) {self.exits}\n{tail}"

    def stop(self) -> None:
        """Stop supervising, then the generator, by its PID."""
        self._stop.set()
        self._thread.join(10)
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def background_load(kit: Path, port: int, out: Path, *args: str) -> Iterator[KitLoad]:
    """The kit's bounded load generator against 127.0.0.1:port (:class:`KitLoad`); stopped on the way out."""
    load = KitLoad(kit, port, out, args)
    try:
        yield load
    finally:
        load.stop()


def run_specmon(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``specmon ARGS`` as a user runs it (this interpreter, this environment), bounded."""
    try:
        return subprocess.run([sys.executable, "-m", "specmon", *args], capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=PROJECT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"specmon {' '.join(args)} did not finish within {timeout_s:g} s;\nstderr so far:\n"
                             f"{(exc.stderr or b'')[-3000:]!r}") from None


def sweep_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``--format json`` document a finished sweep printed, with its stderr if it printed none."""
    try:
        doc: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"sweep printed no JSON (exit {result.returncode});\nstdout: {result.stdout[-2000:]}"
                             f"\nstderr: {result.stderr[-4000:]}") from None
    return doc


async def wait_until(pilot: Any, condition: Callable[[], bool], what: str, limit_s: float,
                     state: Callable[[], str] | None = None) -> None:
    """Let the app run until ``condition()`` holds; the bound only turns a hang into a clear failure.

    ``state``: what the app shows at the deadline, for the failure message (a CI log is all
    there is to read afterwards).
    """
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            seen = f"\nwhat there was at the deadline:\n{state()}" if state is not None else ""
            raise AssertionError(f"never happened within {limit_s:g} s: {what}{seen}")
        await pilot.pause(0.5)


def stop_server(pidfile: str | None, sig: int = signal.SIGINT, late_s: float = 90.0) -> None:
    """Stop the server a pidfile names, waiting ``late_s`` for a pidfile that is not there yet.

    A start whose SSH command timed out on a loaded machine still runs on the host, and its
    server records its PID later: stopping only what is recorded now would orphan it.
    """
    from tests.support.connecting import pid_in, stop_by_pidfile

    deadline = time.monotonic() + late_s
    while pid_in(pidfile) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    stop_by_pidfile(pidfile, sig)
