"""A managed launch profile whose "server" is a shell script that sleeps: a real process to start,
signal and check, with no server behind it (the readiness marker never comes)."""

from __future__ import annotations

from pathlib import Path

from specmon.control.launch import LaunchProfile

SLEEPER = "#!/bin/sh\nexec sleep 600\n"


def sleeper_profile(tmp_path: Path, script_text: str = SLEEPER) -> LaunchProfile:
    """The profile that starts ``script_text`` (written to ``tmp_path/server.sh``), its files in ``tmp_path``."""
    script = tmp_path / "server.sh"
    script.write_text(script_text)
    script.chmod(0o755)
    return LaunchProfile.model_validate({
        "argv": [str(script), "--speculative-num-steps", "{steps}"], "cwd": str(tmp_path),
        "log": str(tmp_path / "server.log"), "pidfile": str(tmp_path / "server.pid"), "ready_marker": "never",
        "stop_grace_s": 1})
