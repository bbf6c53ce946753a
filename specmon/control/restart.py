"""Restart the server with another step count, and follow the restart to ready: the names, in one place.

A restart is split by what each part holds:

* :mod:`specmon.control.restart_controller`: :class:`RestartController` (builds, shows and
  runs a plan, follows it to ready), :class:`RestartError`;
* :mod:`specmon.control.restart_progress`: :class:`Phase`, :class:`RestartProgress`,
  :func:`plan_label`;
* :mod:`specmon.control.startup`: :class:`StartupTracker` (the start-up read from the new log);
* :mod:`specmon.control.adopt_controller`: :func:`controller_for_running_server` (a controller
  for the server already running), :func:`not_adopting`;
* :mod:`specmon.control.connecting_runner`: :class:`ConnectingRunner` (SSH, connected on first use);
* :mod:`specmon.sources.switching`: :class:`SwitchingSource` (the dashboard's source, switched
  to the new log), ``SourceFactory``.

Every name is re-exported here, so ``from specmon.control.restart import ...`` keeps
working. Patch a tunable (``WATCH_TICK_S``) in the module that reads it: patching it here
has no effect.
"""

from __future__ import annotations

from specmon.control.adopt_controller import controller_for_running_server, not_adopting
from specmon.control.connecting_runner import ConnectingRunner
from specmon.control.restart_controller import (
    CRASH_GRACE_TICKS,
    WATCH_TICK_S,
    LogSwitch,
    ProgressCallback,
    RestartController,
    RestartError,
)
from specmon.control.restart_progress import FAILED_PHASES, RUNNING_PHASES, Phase, RestartProgress, plan_label
from specmon.control.startup import LINES_KEPT, StartupTracker
from specmon.sources.switching import SourceFactory, SwitchingSource

__all__ = [
    "CRASH_GRACE_TICKS",
    "ConnectingRunner",
    "FAILED_PHASES",
    "LINES_KEPT",
    "LogSwitch",
    "ProgressCallback",
    "RUNNING_PHASES",
    "Phase",
    "RestartController",
    "RestartError",
    "RestartProgress",
    "SourceFactory",
    "StartupTracker",
    "SwitchingSource",
    "WATCH_TICK_S",
    "controller_for_running_server",
    "not_adopting",
    "plan_label",
]
