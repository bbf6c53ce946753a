"""An engine's ``/metrics`` kept read: open the way to it, scrape about once a second, open again.

The URL may only exist once something is open (an SSH local port forward opened inside the
running app): ``opener`` is an async context manager factory that yields the URL to scrape;
:meth:`MetricsFeed.run` enters it, scrapes until :meth:`MetricsFeed.close`, and enters it again
after :data:`REOPEN_AFTER` failed scrapes in a row (a dropped forward). The dashboard's counters
(:class:`specmon.ui.counters.LiveCounters`) and each replica of a fleet read an engine this way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from specmon.sources.metrics import MetricsScraper

__all__ = ["REOPEN_AFTER", "REOPEN_WAIT_S", "MetricsFeed", "fixed_url"]

#: Scrapes in a row that may fail before the opener is entered again (a dropped SSH forward; a
#: server restarting for minutes only costs a new SSH login this often).
REOPEN_AFTER = 30
#: Seconds between two attempts to open the forward.
REOPEN_WAIT_S = 5.0


def fixed_url(url: str) -> Callable[[], AbstractAsyncContextManager[str]]:
    """An opener for a URL reachable as it is (a server on this machine)."""

    @contextlib.asynccontextmanager
    async def opener() -> AsyncIterator[str]:
        yield url

    return opener


class MetricsFeed:
    """Keeps one engine's ``/metrics`` scraped (see the module docstring).

    Args:
        opener: Yields the URL to scrape while it is entered.
        where: What the URL reaches, for messages (``127.0.0.1:8000 on gpu-box, through SSH``).
        interval_s: Seconds between scrapes.
        scraper_factory: Builds the scraper for a URL (tests inject a clock).
    """

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[str]], *, where: str = "",
                 interval_s: float = 1.0, scraper_factory: Callable[[str], MetricsScraper] | None = None) -> None:
        self.opener = opener
        self.where = where
        self.interval_s = interval_s
        self._factory = scraper_factory or (lambda url: MetricsScraper(url, interval_s=interval_s))
        self.scraper: MetricsScraper | None = None
        #: Why there is no scraper (the way to the URL could not be opened; None otherwise).
        self.problem: str | None = None
        self._closed = False

    async def run(self) -> None:
        """Open, scrape, and open again when the scrapes keep failing (a dropped forward); until closed."""
        while not self._closed:
            self.scraper = None
            try:
                async with self.opener() as url:
                    scraper = self.scraper = self._factory(url)
                    self.problem = None
                    self._opened(scraper)
                    failed = 0
                    while not self._closed:
                        started = asyncio.get_running_loop().time()
                        await scraper.scrape_once()
                        failed = 0 if scraper.available else failed + 1
                        if failed >= REOPEN_AFTER:
                            break
                        elapsed = asyncio.get_running_loop().time() - started
                        await asyncio.sleep(max(0.0, self.interval_s - elapsed))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure to open is shown, never fatal
                self.scraper = None
                self.problem = f"cannot reach the engine's /metrics{self._where()}: {exc or type(exc).__name__}"
            finally:
                if self.scraper is not None:
                    await self.scraper.stop()
            if not self._closed:
                await asyncio.sleep(REOPEN_WAIT_S)

    def _opened(self, scraper: MetricsScraper) -> None:
        """A new scraper, on a freshly opened URL (subclasses mark where its samples start)."""

    async def close(self) -> None:
        """Stop scraping (the worker leaves at its next turn; its task may be cancelled anyway)."""
        self._closed = True
        if self.scraper is not None:
            await self.scraper.stop()

    def _where(self) -> str:
        return f" ({self.where})" if self.where else ""

    @property
    def available(self) -> bool:
        """Whether the last scrape read an engine's series."""
        return self.scraper is not None and self.scraper.available

    @property
    def refused(self) -> int:
        """Scrapes in a row that found nothing listening (0 while the engine answers, or not tried)."""
        return self.scraper.refused if self.scraper is not None else 0

    def reason(self) -> str:
        """Why there are no counters (empty while they are read)."""
        if self.available:
            return ""
        if self.scraper is not None and self.scraper.problem:
            return self.scraper.problem
        return self.problem or "not read yet"
