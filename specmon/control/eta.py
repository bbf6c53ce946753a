"""How long a restart takes on a host, learned from earlier restarts there.

A restart of a large model spends minutes in each phase: stopping the old
server, starting the new process, loading weights, capturing CUDA graphs.
Every successful restart records how long each phase took, per host, in a
small JSON file (``<user data dir>/specmon/restart_times.json`` by default;
the path is injected so tests and the demo keep their own). The estimate for
the next restart is the median of the last few durations of each phase —
robust to one restart that waited on a cold page cache.

During loading the shard counter (``n/m``) gives a better estimate of what is
left of that phase than history: the rate so far, times the shards to go.

Nothing here imports Textual.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specmon import paths

__all__ = [
    "HISTORY_KEPT",
    "TIMED_PHASES",
    "EtaEstimate",
    "EtaStore",
    "estimate",
]

#: The phases whose durations are learned, in the order a restart goes through them.
TIMED_PHASES: tuple[str, ...] = ("stopping", "starting", "loading", "capturing")
#: Restarts remembered per host (the median of these is the estimate).
HISTORY_KEPT = 10
#: Hosts remembered (the least recently restarted ones are forgotten first).
HOSTS_KEPT = 50
_VERSION = 1


@dataclass(frozen=True, slots=True)
class EtaEstimate:
    """What is left of a restart, as far as it can be told.

    Attributes:
        remaining_s: Seconds until ready; None when nothing is known yet.
        expected_total_s: The whole restart's expected length (history), or None.
        basis: How it was estimated, for the screen: ``"3 earlier restarts on gpu-box"``,
            ``"shard rate"``, or why there is no estimate.
    """

    remaining_s: float | None
    expected_total_s: float | None
    basis: str


class EtaStore:
    """Phase durations of earlier restarts, per host, persisted as JSON.

    Args:
        path: The JSON file; None means :func:`specmon.paths.eta_history_file`. A missing or
            damaged file is an empty history (an estimate is a nicety: it must
            never stop a restart).
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else paths.eta_history_file()
        self._hosts: dict[str, list[dict[str, float]]] = {}
        self.problem: str | None = None
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.problem = f"restart times in {self.path} ignored: {exc}"
            return
        hosts = data.get("hosts") if isinstance(data, dict) else None
        if not isinstance(hosts, dict):
            self.problem = f"restart times in {self.path} ignored: unexpected content"
            return
        for host, entries in hosts.items():
            if not isinstance(host, str) or not isinstance(entries, list):
                continue
            kept = [_clean(e) for e in entries if isinstance(e, dict)]
            kept = [e for e in kept if e]
            if kept:
                self._hosts[host] = kept[-HISTORY_KEPT:]

    def history(self, host: str) -> list[dict[str, float]]:
        """The recorded restarts on ``host``, oldest first (copies)."""
        return [dict(e) for e in self._hosts.get(host, [])]

    def medians(self, host: str) -> dict[str, float]:
        """The median duration of each phase over the restarts recorded on ``host``."""
        out: dict[str, float] = {}
        entries = self._hosts.get(host, [])
        for phase in TIMED_PHASES:
            values = [e[phase] for e in entries if phase in e]
            if values:
                out[phase] = float(statistics.median(values))
        return out

    def count(self, host: str) -> int:
        """How many restarts on ``host`` are remembered."""
        return len(self._hosts.get(host, []))

    def record(self, host: str, durations: Mapping[str, float]) -> None:
        """Remember one successful restart's phase durations and save the file.

        Args:
            host: The host label.
            durations: Seconds per phase (only :data:`TIMED_PHASES`, finite, >= 0, are kept).

        A file that cannot be written is reported in :attr:`problem`, not raised.
        """
        entry = _clean(dict(durations))
        if not entry:
            return
        entries = self._hosts.pop(host, [])
        entries.append(entry)
        # Re-inserted last: the dict's order is "least recently restarted first".
        self._hosts[host] = entries[-HISTORY_KEPT:]
        while len(self._hosts) > HOSTS_KEPT:
            del self._hosts[next(iter(self._hosts))]
        self._save()

    def _save(self) -> None:
        data = {"version": _VERSION, "hosts": self._hosts}
        try:
            # Write-then-rename, 0600 in a 0700 folder: host names are nobody else's business.
            paths.write_private(self.path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as exc:
            self.problem = f"could not save restart times to {self.path}: {exc.strerror or exc}"


def _clean(entry: dict[str, object]) -> dict[str, float]:
    out: dict[str, float] = {}
    for phase in TIMED_PHASES:
        value = entry.get(phase)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e7:
            out[phase] = float(value)
    return out


def estimate(
    medians: Mapping[str, float],
    phase: str,
    phase_elapsed_s: float,
    *,
    load_progress: tuple[int, int] | None = None,
    runs: int = 0,
    host: str = "",
) -> EtaEstimate:
    """Estimate the time left in a restart.

    Args:
        medians: Typical seconds per phase on this host (:meth:`EtaStore.medians`).
        phase: The phase now, one of :data:`TIMED_PHASES`.
        phase_elapsed_s: Seconds spent in it so far.
        load_progress: ``(done, total)`` weight shards while loading.
        runs: How many earlier restarts the medians come from (for the basis text).
        host: The host label (for the basis text).

    Returns:
        The estimate; ``remaining_s`` None when neither history nor progress tells.
    """
    if phase not in TIMED_PHASES:
        raise ValueError(f"not a timed phase: {phase!r}")
    index = TIMED_PHASES.index(phase)
    later: Sequence[str] = TIMED_PHASES[index + 1 :]
    total = sum(medians[p] for p in TIMED_PHASES) if all(p in medians for p in TIMED_PHASES) else None
    where = f" on {host}" if host else ""
    history_basis = f"{runs} earlier restart{'' if runs == 1 else 's'}{where}"

    current: float | None = None
    by_rate = False
    if phase == "loading" and load_progress is not None:
        done, count = load_progress
        if 0 < done <= count and phase_elapsed_s > 0:
            # The shards so far set the pace of the rest of this phase.
            current = phase_elapsed_s * (count - done) / done
            by_rate = True
    if current is None and phase in medians:
        # Past the typical length already: "any moment now", never a negative time.
        current = max(0.0, medians[phase] - phase_elapsed_s)
    if current is None:
        return EtaEstimate(None, total, f"no earlier restart{where} to learn from yet")
    missing = [p for p in later if p not in medians]
    if missing:
        if by_rate:
            return EtaEstimate(None, total, f"loading ends in ~{current:.0f} s (shard rate); "
                                            f"no earlier restart{where} to time the rest")
        return EtaEstimate(None, total, f"no earlier restart{where} to learn from yet")
    remaining = current + sum(medians[p] for p in later)
    basis = history_basis + (" and the shard rate" if by_rate else "")
    return EtaEstimate(remaining, total, basis)
