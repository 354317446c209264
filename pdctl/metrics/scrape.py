"""One scrape of a Prometheus endpoint: fetched over HTTP from this machine, parsed with prometheus-client's
text parser into plain samples (name -> [(labels, value)]), stamped with when it was taken.

Why over HTTP from the launching machine: it works alike for local, ssh and Slurm processes (no remote
shell needed), exactly as a Prometheus server would scrape them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import requests

SCRAPE_TIMEOUT_S = 3.0
Series = list[tuple[dict[str, str], float]]


@dataclass(frozen=True)
class Scrape:
    """The samples of one scrape, by sample name (`x_total`, `x_bucket`, `x_sum`, ...), taken at `at`
    (time.monotonic() seconds: only differences between scrapes mean anything)."""

    at: float
    samples: dict[str, Series] = field(default_factory=dict)

    def series(self, name: str, **match: str) -> Series:
        """The series of sample NAME whose labels include MATCH."""
        return [(labels, value) for labels, value in self.samples.get(name, [])
                if all(labels.get(k) == v for k, v in match.items())]

    def has(self, name: str) -> bool:
        return name in self.samples


def parse(text: str, at: float) -> Scrape:
    """Parse Prometheus text exposition; ValueError when it is not that format."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, Series] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"not Prometheus text format: {exc}") from None
    return Scrape(at, samples)


def fetch(url: str, *, timeout: float = SCRAPE_TIMEOUT_S) -> Scrape | str:
    """GET URL and parse it; a string says why not (unreachable, HTTP status, not Prometheus text)."""
    try:
        response = requests.get(url, timeout=timeout)
    except requests.RequestException as exc:
        return "unreachable" if isinstance(exc, requests.ConnectionError) else type(exc).__name__
    at = time.monotonic()
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    try:
        return parse(response.text, at)
    except ValueError as exc:
        return str(exc)
