"""llama.cpp's ``/metrics`` as a counters source, on pages captured from the real ``llama-server``.

The pages in tests/data/metrics/ come from build 11434 (the kit of
shared/real_server_llamacpp/); their README says how. The expected figures are
the ones llama.cpp itself logged for the same requests (``statistics draft-simple:
#gen drafts = 343, #gen tokens = 1346, #acc tokens = 185, #mean acc len = 1.54,
#acc rate/pos = (0.303, 0.120, 0.067, 0.050)``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.sources.metrics import MetricsScraper, Snapshot, difference, parse_snapshot
from tests.support.metricspage import MetricsPage

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"
FRESH = (DATA / "llamacpp_b11434_draft4_fresh.txt").read_text()
AFTER = (DATA / "llamacpp_b11434_draft4_after8.txt").read_text()
NOSPEC = (DATA / "llamacpp_b11434_nospec_after8.txt").read_text()


def test_the_real_page_is_read_as_llamacpp() -> None:
    snap = parse_snapshot(AFTER, 1.0)
    assert snap.engine == "llamacpp"
    assert snap.get("llamacpp:tokens_predicted_total") == 544
    assert snap.get("llamacpp:spec_decode_num_drafts_total") == 343
    assert snap.per_pos == (104, 41, 23, 17)
    assert parse_snapshot(FRESH, 0.0).per_pos is None  # no position accepted anything yet


def test_the_difference_matches_what_llamacpp_logged() -> None:
    s = difference(parse_snapshot(FRESH, 0.0), parse_snapshot(AFTER, 2.0))
    assert s is not None
    assert s.tokens == 544
    assert s.accept_len == pytest.approx(1 + 185 / 343)  # the log: mean acc len = 1.54
    assert round(s.accept_len, 2) == 1.54
    assert s.accept_rate == pytest.approx(185 / 1346)  # draft acceptance, accepted / generated drafts
    assert s.per_position is not None
    assert tuple(round(p, 3) for p in s.per_position) == (0.303, 0.120, 0.067, 0.050)  # acc rate/pos
    # tok/s over the engine's own generation time (0.297437 s), not over the 2 s between scrapes.
    assert s.throughput == pytest.approx(544 / 0.297437)


def test_no_speculation_gives_speed_only() -> None:
    base = Snapshot(0.0, {k: 0.0 for k in parse_snapshot(NOSPEC, 0.0).values})
    s = difference(base, parse_snapshot(NOSPEC, 1.0))
    assert s is not None and s.throughput == pytest.approx(544 / 0.079168)
    assert s.accept_len is None and s.accept_rate is None and s.per_position is None


def test_a_restart_gives_no_sample() -> None:
    assert difference(parse_snapshot(AFTER, 0.0), parse_snapshot(FRESH, 1.0)) is None


def _page(tokens: int, seconds: float, drafts: int, dtok: int, acc: int, pos: list[int]) -> str:
    """A page in the real page's shape with other values."""
    lines = [f"llamacpp:tokens_predicted_total {tokens}", f"llamacpp:tokens_predicted_seconds_total {seconds}",
             f"llamacpp:spec_decode_num_draft_tokens_total {dtok}",
             f"llamacpp:spec_decode_num_accepted_tokens_total {acc}",
             f"llamacpp:spec_decode_num_drafts_total {drafts}"]
    lines += [f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}'
              for i, v in enumerate(pos)]
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 40), st.integers(0, 4)), min_size=1, max_size=12))
def test_requests_finishing_between_scrapes_add_up(requests: list[tuple[int, int, int]]) -> None:
    """Generated requests (tokens, verify steps, accepted per step): the pooled figures of the
    samples are the pooled figures of the requests, whatever lands in which interval."""
    n_max = 4
    tokens = drafts = dtok = acc = 0
    seconds = 0.0
    pos = [0] * n_max
    pages = [FRESH]
    for tok, steps, per_step in requests:
        tokens += tok
        seconds += tok / 1000.0
        drafts += steps
        dtok += steps * n_max
        acc += steps * per_step
        for i in range(per_step):
            pos[i] += steps
        # llama.cpp only shows positions up to the last one that accepted something.
        shown = pos[: max((i + 1 for i, v in enumerate(pos) if v), default=0)]
        pages.append(_page(tokens, seconds, drafts, dtok, acc, shown))
    snaps = [parse_snapshot(p, float(i)) for i, p in enumerate(pages)]
    samples = [difference(a, b) for a, b in zip(snaps, snaps[1:], strict=False)]
    assert all(s is not None for s in samples)
    got_tokens = sum(s.tokens or 0 for s in samples if s is not None)
    assert got_tokens == tokens
    got_acc = sum(((s.accept_len or 1) - 1) * s.drafts for s in samples if s is not None)
    assert got_acc == pytest.approx(acc)
    for s in samples:
        assert s is not None and s.throughput == pytest.approx(1000.0)
        if s.per_position is not None:
            assert all(0 <= p <= 1 for p in s.per_position)
            assert list(s.per_position) == sorted(s.per_position, reverse=True)


async def test_scraper_on_the_real_pages_and_without_metrics() -> None:
    page = MetricsPage(AFTER)
    page.queue.append(FRESH)
    ticks = iter([0.0, 1.0, 2.0, 3.0])
    scraper = MetricsScraper(page.url, clock=lambda: next(ticks))
    try:
        assert await scraper.scrape_once() is None
        assert scraper.available and scraper.engine == "llamacpp"
        s = await scraper.scrape_once()
        assert s is not None and round(s.accept_len or 0, 2) == 1.54
        page.page = None  # the server came back without --metrics
        assert await scraper.scrape_once() is None
        assert not scraper.available and "HTTP 501" in (scraper.problem or "")
        assert "--metrics" in (scraper.problem or "")
    finally:
        await scraper.stop()
        page.close()


def test_the_engines_own_decode_speed() -> None:
    from specmon.sources.metrics import decode_speed

    assert decode_speed(parse_snapshot(FRESH, 0.0), parse_snapshot(AFTER, 5.0)) == pytest.approx(544 / 0.297437)
    assert decode_speed(parse_snapshot(AFTER, 0.0), parse_snapshot(AFTER, 1.0)) is None  # nothing finished
