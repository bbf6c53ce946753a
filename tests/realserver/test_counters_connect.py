"""``connect`` to the real vLLM kit shows the engine's counters, through an SSH port forward, tagged by source.

What a user does: a managed vLLM profile (n-gram speculation, 3 tokens; its
``port`` gives the metrics URL ``http://127.0.0.1:PORT/metrics`` as the host sees
it), the server started over a real OpenSSH sshd on 127.0.0.1, the kit's load
generator running, and ``specmon connect PROFILE``'s dashboard (Pilot). The
dashboard opens its own SSH connection, forwards a local port to the server's
and reads ``/metrics`` about once a second: the accept length, acceptance rate,
per-position acceptance and tok/s panels say ``counters``, and their values
agree with the log's over the same run (the log is tailed at the same time).

Marked ``realserver``. vLLM starts in 25-40 s on an idle 2-core machine; the
whole test is about 1-2 minutes there (bounded waits only turn a hang into a
failure). Ports 18350-18399. The server is stopped by its pidfile and the load
by its PID, in a finally.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from specmon.commands.remote import connect_app, plan_connect, remote_counters, with_restart
from specmon.control.eta import EtaStore
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from tests.support.connecting import connect_args, start_through_controller, write_config
from tests.support.realkits import (
    COUNTERS_PORTS,
    background_load,
    free_port,
    require,
    shared_dir,
    stop_server,
    vllm_missing,
    vllm_profile,
    wait_until,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

#: Bounds that only turn a hang into a failure (a busy shared machine is slow).
COUNTERS_WAIT_S = 240.0


async def test_connect_shows_counters_from_metrics_through_the_ssh_forward(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    from tests.support.app_factory import options

    require(vllm_missing())
    folder = tmp_path / "vllm"
    folder.mkdir()
    port = free_port(COUNTERS_PORTS)
    launch = vllm_profile(folder, port, eager=True)
    profile = {"host": f"{local_user()}@127.0.0.1", "port": openssh_server.port,
               "identity": str(client_home.ssh_dir / "id_ed25519"), "log": str(folder / "vllm_3.log"),
               "engine": "vllm"}
    config = write_config(tmp_path / "config.toml", "cpu-vllm", profile, launch)
    plan = plan_connect(connect_args(config, "cpu-vllm", "--warmup", "0"))
    assert plan.metrics == f"http://127.0.0.1:{port}/metrics"  # from the launch port, as the host sees it
    eta = EtaStore(tmp_path / "eta.json")
    runner = None
    try:
        await start_through_controller(plan, 3, eta)
        with background_load(shared_dir() / "real_server", port, tmp_path / "load.json",
                             "--duration", "240", "--concurrency", "4") as load:
            counters = remote_counters(plan)
            assert counters is not None
            plan, flow, runner = with_restart(plan, eta_store=eta)
            app = connect_app(plan, controller=flow, counters=counters,
                              options=options(warmup=0, window=plan.window), user_themes=None)
            async with app.run_test(size=(120, 36)) as pilot:
                panels = {name: app.query_one(f"#m-{name}", MetricPanel)
                          for name in ("throughput", "accept-len", "accept-rate")}
                bars = app.query_one(PositionBars)

                def counted() -> bool:
                    run = app.feeder.session.current
                    return (all(p.border_subtitle.startswith("counters") for p in panels.values())
                            and bars.border_subtitle == "counters" and run is not None
                            and len(counters.segment(run.id)) >= 10 and len(run.accept_len) >= 5)

                def state() -> str:
                    run = app.feeder.session.current
                    scraper = counters.scraper
                    events = "\n".join(f"  {e.text}" for e in app.feeder.session.events[-15:])
                    return (f"panels {[(n, p.border_subtitle) for n, p in panels.items()]}, bars "
                            f"{bars.border_subtitle!r}; run {None if run is None else (run.id, run.config)}, "
                            f"log samples {0 if run is None else len(run.accept_len)}, counter samples "
                            f"{len(counters.segment(None if run is None else run.id))}; scraper "
                            f"{None if scraper is None else (scraper.url, scraper.scrapes, len(scraper.samples))}"
                            f", resets {None if scraper is None else scraper.resets}, why "
                            f"{counters.reason()!r}\n{load.describe()}\nlast events:\n{events}\nlog tail:\n"
                            + "".join(Path(folder / "vllm_3.log").read_text(errors="replace")
                                      .splitlines(keepends=True)[-15:]))

                await wait_until(pilot, counted, "ten counter samples and five log samples, every panel "
                                 "tagged 'counters'", COUNTERS_WAIT_S, state)
                scraper = counters.scraper
                assert scraper is not None and scraper.engine == "vllm"
                assert not scraper.url.startswith(f"http://127.0.0.1:{port}/")  # a forwarded local port
                run = app.feeder.session.current
                assert run is not None
                samples = counters.segment(run.id)
                al = panels["accept-len"]._view
                ar = panels["accept-rate"]._view
                tp = panels["throughput"]._view
                assert al is not None and ar is not None and tp is not None
                # The panel shows a recent counter sample: the last one when it was drawn (a scrape may
                # have landed since: asking for the very last one failed a local run).
                assert al.current in [s.accept_len for s in samples[-3:]], (al.current, samples[-3:])
                assert al.mean is not None and 1.0 < al.mean <= 4.0  # 3 draft tokens + the bonus token
                assert ar.mean is not None and 0.0 < ar.mean <= 1.0
                assert tp.mean is not None and tp.mean > 0
                assert bars.view is not None and bars.view.values is not None and len(bars.view.values) == 3
                assert all(0.0 <= v <= 1.0 for v in bars.view.values)
                events = "\n".join(e.text for e in app.feeder.session.events)
                assert "counters: reading vllm /metrics" in events and "through an SSH port forward" in events
                # Counters and log measure the same thing over the same run: they agree (loosely: the
                # windows differ by a few seconds and the load varies).
                c_len = statistics.fmean(s.accept_len for s in samples if s.accept_len is not None)
                l_len = statistics.fmean(run.accept_len)
                print(f"\nconnect over OpenSSH, counters through the forward: {len(samples)} samples, accept len "
                      f"{c_len:.3f} (log {l_len:.3f}), accept rate {ar.mean:.3f}, tok/s {tp.mean:.1f}, "
                      f"per position {bars.view.values}")
                assert abs(c_len / l_len - 1) < 0.15, (c_len, l_len)
    finally:
        if runner is not None:
            runner.close()
        stop_server(launch.pidfile)
