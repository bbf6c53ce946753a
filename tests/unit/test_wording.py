"""Counts read right wherever specmon prints them: ``1 step, 1 draft token``, never ``1 draft tokens``.

The real vLLM restart test printed ``ready: 1 step, 1 draft tokens``: each label
pluralised its own nouns and the draft-token ones forgot the singular. Every
label builder now goes through :func:`specmon.wording.counted`; these tests
generate the counts and read every label for a number followed by the wrong form.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from specmon.control.launch import build_plan
from specmon.control.restart_progress import plan_label
from specmon.experiment.stats.guided import Setting
from specmon.wording import counted
from tests.unit.test_launch import managed

NOUNS = ("step", "draft token", "setting", "restart", "time", "token")
_NOUN = "(?:" + "|".join(NOUNS) + ")"
# "1 <noun>s", or another whole number then the bare singular.
WRONG = re.compile(rf"(?<![\d.])(?:1 {_NOUN}s\b|(?:[02-9]|\d\d+) {_NOUN}\b)")


def wrong(text: str) -> list[str]:
    return WRONG.findall(text)


@given(st.integers(0, 10_000), st.sampled_from(NOUNS))
def test_counted_is_singular_only_for_one(n: int, noun: str) -> None:
    text = counted(n, noun)
    assert text == (f"1 {noun}" if n == 1 else f"{n} {noun}s")
    assert not wrong(text)


@given(st.integers(0, 64), st.one_of(st.none(), st.integers(1, 65)))
def test_restart_labels(steps: int, drafts: int | None) -> None:
    text = plan_label(steps, drafts)
    assert not wrong(text), text


def test_the_real_case_reads_right() -> None:
    assert plan_label(1, 1) == "1 step, 1 draft token"


@given(st.integers(1, 8))
def test_the_confirmation_of_a_vllm_restart(steps: int) -> None:
    profile = managed(engine="vllm", argv=["vllm", "serve", "m", "--speculative-config",
                                            '{"method": "ngram", "num_speculative_tokens": {steps}}'])
    text = build_plan(profile, steps).describe()
    assert f"({counted(steps, 'step')}, {counted(steps, 'draft token')})" in text, text
    assert not wrong(text), text


@given(st.integers(1, 8), st.integers(2, 8), st.integers(1, 65))
def test_sweep_setting_labels(steps: int, topk: int, drafts: int) -> None:
    text = Setting(steps, topk, drafts).label()
    assert not wrong(text), text
