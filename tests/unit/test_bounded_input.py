"""Config and theme files: regular files only, bounded, never blocking; theme values in range
(issue 34, item 7).

``--config /dev/zero`` grew to 2.3 GB and a FIFO blocked for ever, deaf to Ctrl+C; a theme with
``luminosity_spread = 1e308`` or NaN crashed the app (also on ``t``); a theme variable could
inject CSS. Tested with real FIFOs, devices, sparse files and the real command line, and with
generated numbers and variable values.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.config import ConfigError, load_config
from specmon.smallfile import SmallFileError, read_small_text
from specmon.ui.theming import ThemeError, load_theme, load_themes

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    os.mkfifo(path)
    return path


def test_a_fifo_a_device_and_a_huge_file_are_refused_at_once(tmp_path: Path, fifo: Path) -> None:
    huge = tmp_path / "huge.toml"
    with open(huge, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that cost nothing
    for path, why in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device"), (tmp_path, "a directory"),
                      (huge, "larger than")):
        start = time.monotonic()
        with pytest.raises(SmallFileError, match=why):
            read_small_text(path)
        assert time.monotonic() - start < 0.5
        with pytest.raises(ConfigError, match=why):
            load_config(path)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 5000), limit=st.integers(1, 4000))
def test_a_regular_file_is_read_whole_or_refused_by_its_size(tmp_path_factory: pytest.TempPathFactory,
                                                             size: int, limit: int) -> None:
    path = tmp_path_factory.mktemp("f") / "c.toml"
    path.write_bytes(b"a" * size)
    if size <= limit:
        assert read_small_text(path, limit=limit) == "a" * size
    else:
        with pytest.raises(SmallFileError, match="larger than"):
            read_small_text(path, limit=limit)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_config_that_is_no_file_exits_2_with_one_sentence_quickly(tmp_path: Path, fifo: Path, kind: str) -> None:
    path = fifo if kind == "fifo" else Path("/dev/zero")
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "specmon", "connect", "gpu-host", "--log", "/x.log",
                          "--config", str(path)], capture_output=True, text=True, timeout=30, cwd=PROJECT,
                         env={**os.environ, "HOME": str(tmp_path)})
    took = time.monotonic() - start
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a regular file" in lines[0] and str(path) in lines[0], run.stderr
    assert "Traceback" not in run.stderr
    assert took < 5  # the interpreter's start-up; the read itself is immediate


# --------------------------------------------------------------------------- themes

BASE = 'name = "t"\nprimary = "#3388ff"\n'


def toml_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(["luminosity_spread", "text_alpha"]),
       value=st.one_of(st.floats(), st.sampled_from([1e308, -1e308, 0.0, 1.0, 1.0000001, -0.0])))
def test_theme_numbers_are_in_range_or_refused_and_never_crash_later(key: str, value: float) -> None:
    text = BASE + f"{key} = {toml_float(value)}\n"
    try:
        theme = load_theme(text, "t.toml")
    except ThemeError as exc:
        assert not (0.0 <= value <= 1.0), value  # only an out-of-range or non-finite value is refused
        assert str(exc).startswith("t.toml: ") and key in str(exc)
        return
    assert 0.0 <= value <= 1.0
    theme.to_color_system().generate()  # what applying it does


CSS_BREAKERS = [";", "{", "}", ":", "/*", "*/", '"', "'", "\n", "$", "!important", "\\"]


@settings(max_examples=300, deadline=None)
@given(value=st.lists(st.one_of(st.sampled_from(CSS_BREAKERS + ["red", "#ff0000", "bold", " ", "rgb(1,2,3)"]),
                                st.text(max_size=4)), min_size=1, max_size=6).map("".join))
def test_theme_variables_cannot_leave_their_declaration(value: str) -> None:
    # A JSON string is a TOML basic string (the same escapes), whatever the value holds.
    text = BASE + "[variables]\n" + f"footer-key-foreground = {json.dumps(value)}\n"
    try:
        theme = load_theme(text, "t.toml")
    except ThemeError:
        return
    stored = theme.variables["footer-key-foreground"]
    assert not any(b in stored for b in CSS_BREAKERS), stored


def test_a_broken_theme_is_one_message_and_the_others_load(tmp_path: Path) -> None:
    (tmp_path / "huge.toml").write_text(BASE.replace('"t"', '"huge"') + "luminosity_spread = 1e308\n")
    (tmp_path / "nan.toml").write_text(BASE.replace('"t"', '"nan"') + "text_alpha = nan\n")
    (tmp_path / "css.toml").write_text(BASE.replace('"t"', '"css"') + '[variables]\nx = "red; } * { display: none"\n')
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "good.toml").write_text(BASE.replace('"t"', '"good"'))
    start = time.monotonic()
    themes, problems = load_themes([tmp_path])
    assert time.monotonic() - start < 1
    assert list(themes) == ["good"]
    assert len(problems) == 4 and all(p.count("\n") == 0 for p in problems)
    assert any("fifo.toml" in p and "FIFO" in p for p in problems)
