"""TOML profiles: validation, unknown keys with file and line, default path."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon import paths
from specmon.config import (
    Config,
    ConfigError,
    Profile,
    load_config,
    locate_key,
)
from specmon.records import Engine

GOOD = """\
default_profile = "kimi"

[profiles.kimi]
host = "alice@gpu-box:2222"
log = "/data/logs/sglang.log"
engine = "sglang"
baseline_tps = 88.8
jump = "bastion"

[profiles.kimi.launch]
argv = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}"]
log = "/data/logs/sglang_{steps}step.log"
ready_marker = "The server is fired up and ready to roll!"

[profiles."local-vllm"]
log_glob = "~/logs/*.log"
engine = "vllm"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_loads_profiles(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    kimi = config.profile("kimi")
    assert kimi.host == "alice@gpu-box:2222"
    assert kimi.engine is Engine.SGLANG
    assert kimi.baseline_tps == 88.8
    assert kimi.launch is not None and kimi.launch.log == "/data/logs/sglang_{steps}step.log"
    assert kimi.launch.argv == ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}"]
    assert config.profile() is kimi  # default_profile
    assert config.profile("local-vllm").log_glob == "~/logs/*.log"


def test_unknown_key_names_file_and_line(tmp_path: Path) -> None:
    text = GOOD.replace('engine = "vllm"', 'engine = "vllm"\nbasline_tps = 3')
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.line == text.splitlines().index("basline_tps = 3") + 1
    assert info.value.path == path
    message = str(info.value)
    assert message.startswith(f"{path}:{info.value.line}: ")
    assert "profiles.local-vllm.basline_tps" in message and "unknown key" in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, 'theme = "dark"\n' + GOOD))
    assert info.value.line == 1
    assert "unknown key 'theme'" in str(info.value)


def test_bad_value_located_at_its_line(tmp_path: Path) -> None:
    text = GOOD.replace("baseline_tps = 88.8", "baseline_tps = -1")
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert info.value.line == text.splitlines().index("baseline_tps = -1") + 1
    assert "greater than 0" in str(info.value)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('host = "-oProxyCommand=x"', "must not start with '-'"),
        ('log = "/x\\u0007.log"', "control characters"),
        ("port = 70000", "less than or equal to 65535"),
        ('engine = "tgi"', "engine"),
    ],
)
def test_rejects_dangerous_or_invalid_values(tmp_path: Path, line: str, needle: str) -> None:
    text = f"[profiles.p]\n{line}\n"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert needle in str(info.value)
    assert info.value.line == 2


def test_bad_profile_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, '[profiles."my box"]\nlog = "/x"\n'))
    assert "profile name" in str(info.value)


def test_toml_syntax_error_has_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "[profiles.a]\nlog = \n"))
    assert info.value.line == 2
    assert "invalid TOML" in str(info.value)


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_missing_default_file_is_empty_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert paths.config_file() == tmp_path / ".config" / "specmon" / "config.toml"
    assert load_config() == Config()
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text(GOOD)
    assert load_config().profile("kimi").log == "/data/logs/sglang.log"


def test_unknown_profile_lists_known(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    with pytest.raises(ConfigError, match=r"unknown profile 'kimmi': did you mean 'kimi'\? \(known: kimi, local-vllm\)"):
        config.profile("kimmi")
    with pytest.raises(ConfigError, match="no default_profile"):
        Config(profiles={"a": Profile()}).profile()


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        (["profiles", "kimi", "log"], 5),
        (["profiles", "kimi", "missing"], 3),  # falls back to the table header
        (["profiles", "kimi", "launch", "log"], 12),
        (["profiles", "local-vllm", "engine"], 17),
        (["default_profile"], 1),
        (["nothing"], None),
    ],
)
def test_locate_key(keys: list[str], line: int | None) -> None:
    assert locate_key(GOOD, keys) == line


def test_locate_dotted_and_inline_keys() -> None:
    text = '[profiles]\nkimi.log = "/x"\nkimi.host = "h"\n'
    assert locate_key(text, ["profiles", "kimi", "host"]) == 3


def test_split_destination_profile_or_host(tmp_path: Path) -> None:
    from specmon.config import split_destination

    config = load_config(write(tmp_path, GOOD))
    assert split_destination("kimi", config) == (None, config.profile("kimi"))
    assert split_destination("gpu2", config) == ("gpu2", None)
    assert split_destination(None, config) == (None, config.profile("kimi"))  # default_profile
    assert split_destination("gpu2", config, "local-vllm") == ("gpu2", config.profile("local-vllm"))
    with pytest.raises(ConfigError):
        split_destination("gpu2", config, "nope")
