"""Sampling a run's metrics: scrape every target in parallel and compute its figures against the previous
scrape of the same target (pdctl.metrics.figures). `pdctl status` takes one sample (lifetime figures);
`pdctl status --watch` keeps one Watch and samples it every interval (figures over the last interval)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pdctl.metrics.figures import engine_figures, router_figures
from pdctl.metrics.scrape import Scrape, fetch
from pdctl.metrics.targets import Target


class Watch:
    """The targets of a run and their last scrapes."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self._last: dict[str, Scrape] = {}

    def sample(self) -> dict[str, dict[str, Any]]:
        """name -> {"url", "figures": {...} | None, "error": str | None} for every target."""
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(self.targets)))) as pool:
            scrapes = list(pool.map(lambda t: fetch(t.url) if t.url else t.why or "no metrics URL", self.targets))
        out: dict[str, dict[str, Any]] = {}
        for target, scrape in zip(self.targets, scrapes):
            if isinstance(scrape, str):
                self._last.pop(target.name, None)  # a gap: the next interval starts afresh
                out[target.name] = {"url": target.url, "figures": None, "error": scrape}
                continue
            prev = self._last.get(target.name)
            if target.kind == "router":
                figures = router_figures(scrape, prev, workers=set(target.workers))
            else:
                figures = engine_figures(scrape, prev)
            out[target.name] = {"url": target.url, "figures": figures, "error": None}
            self._last[target.name] = scrape
        return out
