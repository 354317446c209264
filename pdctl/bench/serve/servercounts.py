"""The servers' own counts of a point, read from their Prometheus metrics before and after it, for the check
that what the client says it got is what the servers say they served.

Why: a load generator can "succeed" while measuring something else (requests answered by a cache or a proxy,
tokens miscounted, a router that dropped requests it reported as done); the servers' counters
(`sglang:num_requests_total`, `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`, SGLang's names:
pdctl.metrics.names) are an independent witness. Each request must be counted once: in a PD deployment every
request finishes on one decode server and is ALSO counted by the prefill server that computed its prompt, so
only decode servers are read; in a colocated one every server. Counters are summed over every label set
(is_streaming, and SGLang's dp_rank / tp_rank labels), never one series.

The servers count a request when it finishes, which can be a moment after the client read its last token: the
after-reading waits (up to SETTLE_S) until the request counter has grown by what the client expects.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pdctl.metrics import names as N
from pdctl.metrics.figures import total
from pdctl.metrics.scrape import Scrape, fetch

SETTLE_S = 15.0
POLL_S = 0.1
COUNTERS = {"requests": N.REQUESTS, "prompt_tokens": N.PROMPT_TOKENS, "generation_tokens": N.GENERATION_TOKENS}


@dataclass(frozen=True)
class Counts:
    """The counters summed over every counting server (and every label set)."""

    requests: float
    prompt_tokens: float
    generation_tokens: float

    def minus(self, before: Counts) -> dict[str, int]:
        return {name: round(getattr(self, name) - getattr(before, name)) for name in COUNTERS}


def _counts(scrape: Scrape) -> Counts | str:
    values = {name: total(scrape, metric) for name, metric in COUNTERS.items()}
    missing = [COUNTERS[name] for name, value in values.items() if value is None]
    if len(missing) == len(COUNTERS):
        return "exports no request counters (is --enable-metrics on?)"
    return Counts(**{name: value or 0.0 for name, value in values.items()})


def read(urls: tuple[str, ...]) -> Counts | str:
    """The summed counters of the servers at URLS (base URLs; /metrics is read), or why they cannot be read."""
    if not urls:
        return "no server to read (the target does not say which servers serve it)"
    with ThreadPoolExecutor(max_workers=min(8, len(urls))) as pool:
        scrapes = list(pool.map(lambda u: fetch(u.rstrip("/") + "/metrics"), urls))
    out = Counts(0.0, 0.0, 0.0)
    for url, scrape in zip(urls, scrapes):
        if isinstance(scrape, str):
            return f"{url}/metrics: {scrape}"
        counts = _counts(scrape)
        if isinstance(counts, str):
            return f"{url}/metrics {counts}"
        out = Counts(out.requests + counts.requests, out.prompt_tokens + counts.prompt_tokens,
                     out.generation_tokens + counts.generation_tokens)
    return out


def settled(urls: tuple[str, ...], before: Counts, requests: int, *, settle_s: float = SETTLE_S) -> Counts | str:
    """The counters after a point, once the request counter grew by REQUESTS since BEFORE (or SETTLE_S passed:
    then what they say, which the check will find short)."""
    deadline = time.monotonic() + settle_s
    while True:
        now = read(urls)
        if isinstance(now, str) or now.requests - before.requests >= requests or time.monotonic() >= deadline:
            return now
        time.sleep(POLL_S)
