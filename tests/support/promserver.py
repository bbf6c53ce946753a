"""Debian's real ``/usr/bin/prometheus`` on a free port of 127.0.0.1, scraping given targets every second.

Used by the Prometheus-backed fleet tests (fake exporters in tests/unit, real llama-servers in
tests/realserver). Its data lives in the test's tmp folder; :meth:`Prometheus.stop` ends it by
the PID started here. A missing binary fails the test (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.net import free_port

PROMETHEUS = Path("/usr/bin/prometheus")


class Prometheus:
    """``/usr/bin/prometheus`` on a free port, scraping the given jobs every second."""

    def __init__(self, tmp: Path, jobs: dict[str, Sequence[str]]) -> None:
        if not os.access(PROMETHEUS, os.X_OK):
            pytest.fail(f"{PROMETHEUS} is missing: apt-get install prometheus (.ci/run installs it)")
        config = "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        for job, exporters in jobs.items():
            targets = ", ".join(f"'{instance}'" for instance in exporters)
            config += (f"  - job_name: {job}\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
                       f"    static_configs:\n      - targets: [{targets}]\n")
        (tmp / "prometheus.yml").write_text(config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "prometheus.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(PROMETHEUS), f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # by PID: the Popen started here
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]
