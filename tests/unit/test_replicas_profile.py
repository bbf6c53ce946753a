"""Fleet profiles that list ``replicas``: validation, and one follower per replica built from them.

Generated profiles (hypothesis) check the rules as a class: any replica list with a log for
every replica and no two replicas on one log is taken; any list breaking one rule is refused
with a sentence that names the replica; the followers are built for exactly the replicas
given, over SSH for those with a host and on this machine for the others, options winning
over the profile as for one server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.cli import build_parser
from specmon.commands.replicas import replica_members
from specmon.config import MAX_REPLICAS, ConfigError, parse_config
from specmon.sources.local import LocalTailSource
from specmon.sources.ssh import SSHTailSource

HOSTS = st.sampled_from(["gpu-1", "gpu-2", "root@10.0.0.3", "node-a:2222", None])
LOGS = st.sampled_from(["/data/vllm.log", "/scratch/server.log", "~/logs/llama.log", None])


def toml(profile_lines: list[str], replicas: list[dict[str, str | None]]) -> str:
    lines = ["[profiles.fleet]", *profile_lines]
    for r in replicas:
        lines.append("[[profiles.fleet.replicas]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in r.items() if v is not None]
    return "\n".join(lines) + "\n"


def args(*extra: str) -> object:
    return build_parser().parse_args(["connect", "fleet", "--no-record", *extra])


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(st.tuples(HOSTS, LOGS, st.booleans()), min_size=1, max_size=8),
       profile_log=LOGS)
def test_generated_replica_lists_are_taken_or_refused_by_the_rules(
        entries: list[tuple[str | None, str | None, bool]], profile_log: str | None) -> None:
    replicas = [{"host": h, "log": log, "name": f"r{i}" if named else None} for i, (h, log, named) in enumerate(entries)]
    text = toml([f'log = "{profile_log}"'] if profile_log else [], replicas)
    places = [(h or "", log or profile_log) for h, log, _ in entries]
    no_log = any(p[1] is None for p in places)
    twice = len(set(places)) < len(places)
    if no_log or twice:
        with pytest.raises(ConfigError) as err:
            parse_config(text)
        assert ("has no log" if no_log else "read the same log") in str(err.value)
        return
    profile = parse_config(text).profile("fleet")
    assert profile.replicas is not None and len(profile.replicas) == len(entries)
    members = replica_members(args(), profile)
    assert len(members) == len(entries)
    assert len({m.name for m in members}) == len(members)  # every replica its own name
    for (host, log, named), member, i in zip(entries, members, range(len(entries)), strict=True):
        if named:
            assert member.name == f"r{i}"
        if host is None:
            assert isinstance(member.source, LocalTailSource)
            assert str(member.source.path) == str(Path(log or profile_log or "").expanduser())
        else:
            assert isinstance(member.source, SSHTailSource)
            assert member.source.path == (log or profile_log)
            assert member.where == f"{host}:{log or profile_log}"


def test_the_profiles_ssh_settings_reach_every_replica_and_options_win() -> None:
    text = toml(['log = "/data/vllm.log"', 'user = "ops"', "port = 2200", 'identity = "/keys/id"', "lines = 50"],
                [{"host": "gpu-1"}, {"host": "admin@gpu-2:2222", "log": "/other.log"}])
    profile = parse_config(text).profile("fleet")
    first, second = (m.source for m in replica_members(args(), profile))
    assert isinstance(first, SSHTailSource) and isinstance(second, SSHTailSource)
    assert (first.target.user, first.target.port, first.target.identity) == ("ops", 2200, ("/keys/id",))
    assert (second.target.user, second.target.port) == ("admin", 2222)  # its host string wins over the profile
    assert first._lines == 50 and second.path == "/other.log"
    again = replica_members(args("-p", "2300", "--lines", "5"), profile)
    assert again[0].source.target.port == 2300 and again[0].source._lines == 5  # type: ignore[union-attr]


@pytest.mark.parametrize(("profile_lines", "replicas", "says"), [
    (['prometheus = "http://127.0.0.1:9090"', "selector = '{job=\"x\"}'"], [{"host": "a", "log": "/l"}], "not both"),
    (['host = "gpu"', 'log = "/l"'], [{"host": "a"}], "host belongs to a one-server profile"),
    (['log = "/l"', 'metrics_url = "http://127.0.0.1:8000/metrics"'], [{"host": "a"}], "metrics_url"),
    (['log = "/l"'], [{"host": "a", "name": "x"}, {"host": "b", "name": "x"}], "both named 'x'"),
    (['log = "/l"'], [{"host": "-oProxyCommand=x"}], "must not start with '-'"),
    (['log = "/l"'], [{"host": "a", "log": "/x\u0007y"}], "control characters"),
    (['log = "/l"'], [{"host": "a", "port": "22"}], "unknown key 'port'"),
])
def test_bad_replica_profiles_are_refused_with_a_sentence(profile_lines: list[str], replicas: list[dict[str, str]],
                                                        says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(toml(profile_lines, replicas))  # type: ignore[arg-type]
    assert says in str(err.value)


def test_an_empty_or_huge_replica_list_is_refused() -> None:
    with pytest.raises(ConfigError):
        parse_config('[profiles.fleet]\nlog = "/l"\nreplicas = []\n')
    many = toml(['log = "/l"'], [{"host": f"h{i}"} for i in range(MAX_REPLICAS + 1)])
    with pytest.raises(ConfigError) as err:
        parse_config(many)
    assert str(MAX_REPLICAS) in str(err.value)


def test_one_server_options_are_refused_for_a_replicas_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specmon.cli import main

    config = tmp_path / "config.toml"
    config.write_text(toml(['log = "/l"'], [{"host": "a"}, {"host": "b"}]))
    for option in (["--log", "/x.log"], ["--metrics", "http://127.0.0.1:1/metrics"], ["--record", str(tmp_path / "r")]):
        code = main(["connect", "fleet", "--config", str(config), "--headless", *option])
        assert code == 2
        assert "does not apply to a fleet of replicas" in capsys.readouterr().err
