"""The reference engine's Prometheus metrics: SGLang's names, labels, meanings and buckets (pdctl.metrics.names),
in one CollectorRegistry per server (never the process-global default: two engines in one test process
must not share counters).

Why prometheus-client: it is the exposition library SGLang itself uses, thread-safe, and its text output
is what Prometheus, Grafana and `pdctl status --watch` parse. Events (tokens, finished requests, transfers)
are counted as they happen through the hooks below, which are called from the engine thread (tokens,
requests) and the PD roles' transfer threads (transfers); each is a few counter increments on label children
bound once at start. Gauges (running, queued, KV usage) are read only when scraped (`load()`), so an idle or
unscraped server pays nothing for them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pdctl.metrics import names as N


@dataclass(frozen=True)
class Load:
    """What a server holds right now (SGLang's scheduler gauges). Token counts are in tokens (pages * page
    size); `swa_*` are None without a hybrid-SWA pool. used + available + evictable = capacity per pool."""

    running: int
    queued: int
    transferring: int  # PD: requests whose KV is being sent (prefill) or received (decode)
    full_capacity: int
    full_used: int
    full_available: int
    full_evictable: int
    swa_capacity: int | None = None
    swa_used: int | None = None
    swa_available: int | None = None
    swa_evictable: int | None = None
    new_token_ratio: float = 0.0

    @property
    def full_usage(self) -> float:
        return self.full_used / self.full_capacity if self.full_capacity else 0.0

    @property
    def swa_usage(self) -> float | None:
        if not self.swa_capacity or self.swa_used is None:
            return None
        return self.swa_used / self.swa_capacity


HIT_WINDOW = 32  # cache_hit_rate: over the last this many admitted prompts (SGLang: its last prefill batch)


class EngineMetrics:
    """Counters and histograms of one server, plus a collector that reads its gauges from `load()`.

    `role` is prefill | decode | colocated. As in SGLang, a PD prefill server observes no TTFT or ITL (its
    only output token is the first one, which decode reports); everything else is counted on every role.
    """

    def __init__(self, *, model_name: str, role: str, page_size: int, context_len: int,
                 load: Callable[[], Load] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.role = role
        self.load = load
        self.registry = CollectorRegistry()
        etype = N.engine_type(role)
        self._sched = {"model_name": model_name, "engine_type": etype, "tp_rank": "0", "pp_rank": "0",
                       "moe_ep_rank": "0"}
        tok = {"model_name": model_name, "engine_type": etype}
        self._static = {N.PAGE_SIZE: ("The page size.", page_size), N.CONTEXT_LEN: ("The context length.", context_len)}
        reg, sched_names, tok_names = self.registry, list(self._sched), list(tok)

        def counter(name: str, doc: str, labels: list[str]) -> Any:
            return Counter(name, doc, labelnames=labels, registry=reg)

        def histogram(name: str, doc: str, labels: list[str], buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, labelnames=labels, buckets=buckets, registry=reg)

        def streaming(metric: Any) -> dict[bool, Any]:
            return {s: metric.labels(**tok, is_streaming="true" if s else "false") for s in (False, True)}

        stream_names = [*tok_names, "is_streaming"]
        self._requests = streaming(counter(N.REQUESTS, "Number of requests processed.", stream_names))
        self._prompt = streaming(counter(N.PROMPT_TOKENS, "Number of prefill tokens processed.", stream_names))
        self._generation = streaming(
            counter(N.GENERATION_TOKENS, "Number of generation tokens processed.", stream_names))
        self._cached = counter(N.CACHED_TOKENS, "Number of cached prompt tokens by source (device/host/storage).",
                               [*tok_names, "cache_source"]).labels(**tok, cache_source="device")
        self._aborted = counter(N.ABORTED, "Number of requests aborted.", tok_names).labels(**tok)
        self._ttft = streaming(histogram(N.TTFT, "Histogram of time to first token in seconds.", stream_names,
                                         N.TTFT_BUCKETS))
        self._itl = histogram(N.ITL, "Histogram of inter-token latency in seconds.", tok_names,
                              N.ITL_BUCKETS).labels(**tok)
        self._e2e = streaming(histogram(N.E2E, "Histogram of End-to-end request latency in seconds", stream_names,
                                        N.E2E_BUCKETS))
        s = self._sched
        self._retracted = counter(N.RETRACTED, "Total number of retracted requests.", sched_names).labels(**s)
        self._bootstrap_failed = counter(N.BOOTSTRAP_FAILED, "The number of bootstrap failed requests.",
                                         sched_names).labels(**s)
        self._transfer_failed = counter(N.TRANSFER_FAILED, "The number of transfer failed requests.",
                                        sched_names).labels(**s)
        self._kv_latency = histogram(N.KV_TRANSFER_LATENCY_MS, "Histogram of KV cache transfer latency in ms.",
                                     sched_names, N.KV_LATENCY_MS_BUCKETS).labels(**s)
        self._kv_mb = histogram(N.KV_TRANSFER_TOTAL_MB, "Histogram of KV cache transfer size in MB.", sched_names,
                                N.KV_TOTAL_MB_BUCKETS).labels(**s)
        self._kv_speed = histogram(N.KV_TRANSFER_SPEED, "Histogram of KV cache transfer speed in GB/s.",
                                   sched_names, N.KV_SPEED_BUCKETS).labels(**s)
        transfers = counter(N.KV_TRANSFERS, "pdctl: KV transfers of requests by outcome (ok | failed), on the "
                            "prefill (sent) and the decode (received) side.", [*sched_names, "outcome"])
        self._transfers = {ok: transfers.labels(**s, outcome="ok" if ok else "failed") for ok in (True, False)}
        self._kv_bytes = counter(N.KV_TRANSFER_BYTES, "pdctl: bytes of KV cache written to decode by this "
                                 "prefill (the transfer descriptors' lengths).", sched_names).labels(**s)
        self._hits: deque[tuple[int, int]] = deque(maxlen=HIT_WINDOW)
        self.registry.register(_LoadCollector(self))

    # ---- hooks: engine thread ----------------------------------------------------------------------------
    def token(self, req: Any, now: float) -> None:
        """REQ gained an output token at NOW (monotonic): its first (TTFT since it arrived) or a later one
        (ITL since the previous one). A PD prefill observes neither (SGLang's rule)."""
        if self.role != "prefill":
            if len(req.output_ids) == 1:
                self._ttft[req.on_progress is not None].observe(now - req.created)
            elif req.token_at:
                self._itl.observe(now - req.token_at)
        req.token_at = now

    def finished(self, req: Any) -> None:
        """REQ finished (any outcome): SGLang's observe_one_finished_request, and an abort counted as such."""
        stream = req.on_progress is not None
        self._requests[stream].inc()
        self._prompt[stream].inc(req.prompt_len)
        self._generation[stream].inc(len(req.output_ids))
        if req.cached_tokens > 0:
            self._cached.inc(req.cached_tokens)
        self._e2e[stream].observe(time.monotonic() - req.created)
        if req.error is not None:
            self._aborted.inc()

    def admitted(self, cached: int, total: int) -> None:
        """A prompt of TOTAL tokens was admitted with CACHED of them from the prefix cache."""
        self._hits.append((cached, total))

    def retracted(self) -> None:
        self._retracted.inc()

    # ---- hooks: PD roles' threads ------------------------------------------------------------------------
    def transfer_done(self, nbytes: int | None = None, seconds: float | None = None) -> None:
        """One request's KV arrived (decode: NBYTES None) or was written (prefill: NBYTES in SECONDS)."""
        self._transfers[True].inc()
        if nbytes is None or seconds is None:
            return
        self._kv_bytes.inc(nbytes)
        mib = nbytes / (1024 * 1024)
        self._kv_mb.observe(mib)
        if seconds > 0:
            self._kv_latency.observe(seconds * 1000)
            self._kv_speed.observe(mib / 1024 / seconds)

    def transfer_failed(self, *, bootstrap: bool = False) -> None:
        """One request's transfer failed; BOOTSTRAP: before any KV moved (handshake, peer never asked)."""
        self._transfers[False].inc()
        (self._bootstrap_failed if bootstrap else self._transfer_failed).inc()

    # ---- exposition --------------------------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The Prometheus text format of every metric of this server."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def hit_rate(self) -> float:
        hits = list(self._hits)
        total = sum(t for _, t in hits)
        return sum(c for c, _ in hits) / total if total else 0.0


class _LoadCollector:
    """Scheduler gauges, read from the engine at scrape time (SGLang's names and labels)."""

    def __init__(self, metrics: EngineMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        m = self.m
        labels, values = list(m._sched), list(m._sched.values())

        def gauge(name: str, doc: str, value: float | None) -> Any:
            family = GaugeMetricFamily(name, doc, labels=labels)
            if value is not None:
                family.add_metric(values, float(value))
            return family

        for name, (doc, value) in m._static.items():
            yield gauge(name, doc, value)
        yield gauge(N.CACHE_HIT_RATE, "The prefix cache hit rate.", m.hit_rate())
        if m.load is None:
            return
        load = m.load()
        usage = max(load.full_usage, load.swa_usage or 0.0)
        queue_name = {"prefill": N.PREFILL_INFLIGHT, "decode": N.DECODE_TRANSFER}.get(m.role)
        yield gauge(N.RUNNING, "The number of running requests.", load.running)
        yield gauge(N.QUEUED, "The number of requests in the waiting queue.", load.queued)
        if queue_name is not None:
            yield gauge(queue_name, "Requests whose KV is being transferred.", load.transferring)
        yield gauge(N.TOKEN_USAGE, "The token usage.", usage)
        yield gauge(N.FULL_TOKEN_USAGE, "The token usage for full attention layers.", load.full_usage)
        yield gauge(N.MAX_TOTAL_TOKENS, "Maximum total number of tokens in the KV cache pool.", load.full_capacity)
        yield gauge(N.KV_USED_TOKENS, "Number of actively used token slots in the KV cache pool.", load.full_used)
        yield gauge(N.KV_AVAILABLE_TOKENS, "Number of free token slots in the KV cache pool.", load.full_available)
        yield gauge(N.KV_EVICTABLE_TOKENS, "Number of evictable (radix-cached) token slots in the KV cache pool.",
                    load.full_evictable)
        yield gauge(N.NEW_TOKEN_RATIO, "The new token ratio.", load.new_token_ratio)
        if load.swa_capacity is not None:
            yield gauge(N.SWA_TOKEN_USAGE, "The token usage for SWA layers.", load.swa_usage)
            yield gauge("sglang:swa_used_tokens", "Number of actively used token slots in the SWA pool.",
                        load.swa_used)
            yield gauge("sglang:swa_available_tokens", "Number of free token slots in the SWA pool.",
                        load.swa_available)
            yield gauge("sglang:swa_evictable_tokens", "Number of evictable token slots in the SWA pool.",
                        load.swa_evictable)
