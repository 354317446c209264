"""The bottleneck of one concurrency level of `pdctl bench serve`: the deployment's servers (and its router, when
known) scraped every SAMPLE_S while the level runs, each look a sample of pdctl.metrics.bottleneck, judged when
the level ends. The samples cover the level's warm-up and drain too, so a rule needs to hold in half of the
loaded samples (LEVEL_SHARE), not all; counters and histograms (refusals, KV transfer and TTFT percentiles) are
judged once over the whole level: the first look against the last."""

from __future__ import annotations

import threading
from typing import Any

from pdctl.metrics.bottleneck import Sample, judge, sample_of
from pdctl.metrics.figures import engine_figures, router_figures
from pdctl.metrics.scrape import Scrape, fetch

SAMPLE_S = 0.5
LEVEL_SHARE = 0.5


class LevelWatch:
    """Samples SERVERS ((role, base URL) pairs) and ROUTER_METRICS (a URL, or None) in a thread until stopped."""

    def __init__(self, servers: tuple[tuple[str, str], ...], router_metrics: str | None) -> None:
        self.servers, self.router_metrics = servers, router_metrics
        self.samples: list[Sample] = []
        self._last: dict[str, Scrape] = {}
        self._first: dict[str, Scrape] = {}
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.servers:
            return
        self._look()  # the baseline every interval is measured from
        self._first = dict(self._last)
        self.samples.clear()
        self._thread = threading.Thread(target=self._run, name="bench-level-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._halt.wait(SAMPLE_S):
            self._look()

    def _look(self) -> None:
        latest: dict[str, Scrape] = {}
        for _role, url in self.servers:
            scrape = fetch(url.rstrip("/") + "/metrics")
            if not isinstance(scrape, str):
                latest[url] = scrape
        if self.router_metrics:
            scrape = fetch(self.router_metrics)
            if not isinstance(scrape, str):
                latest["router"] = scrape
        self.samples.append(self._sample(latest, self._last))
        self._last.update(latest)

    def _sample(self, now: dict[str, Scrape], before: dict[str, Scrape]) -> Sample:
        """The sample of the scrapes NOW against BEFORE (per server: no figures without both)."""
        processes: list[dict[str, Any]] = []
        for role, url in self.servers:
            if url in now and url in before:
                processes.append({"role": role, "node": url, "metrics": engine_figures(now[url], before[url])})
        router = None
        if "router" in now and "router" in before:
            workers = {u for r, u in self.servers if r == "decode"}
            router = {"metrics": router_figures(now["router"], before["router"], workers=workers)}
        return sample_of(processes, router)

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the level's verdict document."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if not self.servers:
            return {"verdict": "not enough data", "role": None, "samples": 0, "roles": {},
                    "evidence": ["the target does not say which servers serve it"]}
        return judge(self.samples, share=LEVEL_SHARE, whole=self._sample(self._last, self._first)).document()
