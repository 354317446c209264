"""What limits a deployment right now: a bottleneck verdict per role and for the run, from measured signals only
(pure: rules as data, each a small function over samples of the figures of pdctl.metrics.figures).

A sample is one look at every server and the router over an interval (`status --watch` takes one per refresh,
`bench serve` several per concurrency level). A rule fires only when its condition holds in every loaded sample
of the window (at least MIN_SAMPLES): one full queue on a loaded machine is not a bottleneck. The verdicts:

- kv-bound (decode): requests wait at decode (queued >= QUEUE_MIN). A decode server batches continuously and
  admits a request only when its KV pool can hold it AND the room its running requests still need (SGLang's
  new_token_ratio reservation, the reference engine's too), so a decode queue means KV admission, even with
  the pool's current use well below full (measured: 53% used, 2 waiting, on a 512-token pool). Also kv-bound:
  a nearly full pool (>= KV_FULL, SGLang's token_usage of the fullest server) that retracted requests.
  (A decode held at SGLang's --max-running-requests looks the same from its metrics; the evidence shows the
  running count.)
- kv-bound (colocated): the pool is nearly full (>= KV_FULL) AND requests wait or were retracted; a colocated
  queue with KV room is colocated-bound (below).
- transfer-bound (PD): the KV transfer takes a large share of the time to first token: the prefill's KV
  transfer latency p50 >= TRANSFER_SHARE of decode's TTFT p50, over at least MIN_TRANSFERS transfers.
- queue-bound (router): the router's limiter turned requests away in the interval (sglang-router's
  smg_http_rate_limit_total, results other than `allowed`: its --max-concurrent-requests; sglang-router 0.3.2
  answers them 408 after about half a second rather than queueing, measured) while the workers have room (no
  queue of their own, KV below KV_FULL): the limit in front of them binds, not the workers.
- prefill-bound / colocated-bound: requests queue at that role (>= QUEUE_MIN) while its KV pool has room: it
  cannot take prompts faster (prefill compute, its chunked-prefill budget); GPU activity is added as evidence
  where the node reports it.

Mistakes this avoids (a diagnostics package run against a pdctl deployment made each): no prefill/decode load
ratio (decode holds every request for its whole generation, so a healthy PD deployment always has more running
on decode than on prefill); every figure is summed or maxed over all label sets of a metric (SGLang adds
dp_rank labels under DP attention: pdctl.metrics.figures); SGLang's current names (inter_token_latency_seconds).
"idle" when nothing ran in the window, "none" when load ran and nothing limited it, "not enough data" when the
window is too short or a rule's signals are missing — never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KV_FULL = 0.90
QUEUE_MIN = 2
TRANSFER_SHARE = 0.5
MIN_TRANSFERS = 3
MIN_SAMPLES = 2


@dataclass(frozen=True)
class RoleSample:
    """One role's servers in one sample: sums of queues and rates, the fullest KV pool, the slowest p50s."""

    role: str
    servers: int
    running: int | None
    queued: int | None
    requests_per_s: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    kv_usage: float | None
    retracted: int | None
    ttft_p50_ms: float | None
    transfer_p50_ms: float | None
    transfers: int
    gpu_util_pct: float | None = None

    @property
    def loaded(self) -> bool:
        return bool(self.running or self.queued or self.requests_per_s)


@dataclass(frozen=True)
class Sample:
    """One look at the run: its roles, and the router (connections open, requests in flight to workers)."""

    roles: dict[str, RoleSample]
    router_refused: int | None = None
    router_in_flight: int | None = None

    @property
    def loaded(self) -> bool:
        return any(r.loaded for r in self.roles.values()) or bool(self.router_refused)


def _sum(values: list[Any]) -> Any:
    return None if not values or any(v is None for v in values) else sum(values)


def _max(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def role_sample(role: str, figures: list[dict[str, Any]], gpu_util_pct: float | None = None) -> RoleSample:
    """The sample of ROLE from its servers' interval figures (pdctl.metrics.figures.engine_figures)."""
    def get(key: str) -> list[Any]:
        return [f.get(key) for f in figures]

    def p50(key: str) -> list[Any]:
        return [(f.get(key) or {}).get("p50") for f in figures]

    return RoleSample(
        role=role, servers=len(figures), running=_sum(get("running")), queued=_sum(get("queued")),
        requests_per_s=_sum(get("requests_per_s")), prompt_tokens_per_s=_sum(get("prompt_tokens_per_s")),
        generation_tokens_per_s=_sum(get("generation_tokens_per_s")), kv_usage=_max(get("kv_usage")),
        retracted=_sum(get("retracted")), ttft_p50_ms=_max(p50("ttft_ms")), transfer_p50_ms=_max(p50("kv_transfer_ms")),
        transfers=sum(int((f.get("kv_transfer_ms") or {}).get("count") or 0) for f in figures),
        gpu_util_pct=gpu_util_pct)


def sample_of(processes: list[dict[str, Any]], router: dict[str, Any] | None,
              gpu_util: dict[str, float] | None = None) -> Sample:
    """A sample from `status --watch`'s entries (role, node, interval figures) and the router's figures; GPU_UTIL:
    node -> mean GPU utilisation, where known."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    nodes: dict[str, list[float]] = {}
    for p in processes:
        if p.get("metrics") and p["metrics"].get("kind") == "engine" and p["metrics"].get("window") == "interval":
            by_role.setdefault(p["role"], []).append(p["metrics"])
            if gpu_util and p.get("node") in gpu_util:
                nodes.setdefault(p["role"], []).append(gpu_util[p["node"]])
    roles = {role: role_sample(role, figs, _max(nodes.get(role, []))) for role, figs in by_role.items()}
    fig = (router or {}).get("metrics") or {}
    return Sample(roles, fig.get("refused"), fig.get("running"))


@dataclass(frozen=True)
class Finding:
    verdict: str
    role: str
    evidence: list[str]


Check = Callable[[Sample], "Finding | None"]


def _kv_bound(s: Sample) -> Finding | None:
    for role in ("decode", "colocated"):
        r = s.roles.get(role)
        if r is None:
            continue
        waiting = (r.queued or 0) >= QUEUE_MIN
        full = r.kv_usage is not None and r.kv_usage >= KV_FULL
        if (full and (waiting or (r.retracted or 0) > 0)) or (role == "decode" and waiting):
            use = "unknown" if r.kv_usage is None else f"{100 * r.kv_usage:.0f}% used"
            why = "nearly full" if full else "admission reserves room for the running requests' remaining tokens"
            return Finding("kv-bound", role, [
                f"{role} KV pool {use} ({why})",
                (f"{r.queued or 0} request(s) waiting for KV room, {r.running or 0} running, "
                f"{r.retracted or 0} retracted in the interval")])
    return None


def _transfer_bound(s: Sample) -> Finding | None:
    pre, dec = s.roles.get("prefill"), s.roles.get("decode")
    if pre is None or dec is None or pre.transfer_p50_ms is None or not dec.ttft_p50_ms:
        return None
    share = pre.transfer_p50_ms / dec.ttft_p50_ms
    if pre.transfers >= MIN_TRANSFERS and share >= TRANSFER_SHARE:
        return Finding("transfer-bound", "prefill", [
            (f"KV transfer p50 {pre.transfer_p50_ms:.0f} ms = {100 * share:.0f}% of decode's TTFT p50 "
            f"{dec.ttft_p50_ms:.0f} ms (>= {100 * TRANSFER_SHARE:.0f}%), {pre.transfers} transfers")])
    return None


def _queue_bound(s: Sample) -> Finding | None:
    if not s.router_refused:
        return None
    room = all((r.queued or 0) < QUEUE_MIN and (r.kv_usage or 0) < KV_FULL for r in s.roles.values())
    if room:
        return Finding("queue-bound", "router", [
            (f"router: its limiter turned {s.router_refused} request(s) away in the interval, "
            f"{s.router_in_flight if s.router_in_flight is not None else '?'} in flight to the workers"),
            f"workers have room: no queue of their own, KV below {100 * KV_FULL:.0f}%"])
    return None


def _role_bound(s: Sample) -> Finding | None:
    for role, r in s.roles.items():
        if role == "decode":
            continue  # a decode queue is KV admission (_kv_bound)
        if (r.queued or 0) >= QUEUE_MIN and (r.kv_usage is None or r.kv_usage < KV_FULL):
            evidence = [f"{role}: {r.queued} request(s) queued, {r.running or 0} running, KV "
                        + ("unknown" if r.kv_usage is None else f"{100 * r.kv_usage:.0f}% used") + " (room left)"]
            if r.gpu_util_pct is not None:
                evidence.append(f"{role} GPU utilisation {r.gpu_util_pct:.0f}%")
            return Finding(f"{role}-bound", role, evidence)
    return None


# Rules in the order a run's verdict picks them (the first that holds names the run's bottleneck), and how each
# is judged: "gauge" rules read queue lengths and pool use, momentary values that must persist (every loaded
# sample, or SHARE of them); "window" rules read counters and histograms (refusals, transfer and TTFT
# percentiles), which a short interval may not observe at all: judged once over the whole window when the
# caller has it (bench serve's level), else in any loaded sample (status --watch's refreshes).
RULES: list[tuple[str, Check, str]] = [("kv-bound", _kv_bound, "gauge"), ("transfer-bound", _transfer_bound, "window"),
                                       ("queue-bound", _queue_bound, "window"), ("role-bound", _role_bound, "gauge")]


@dataclass
class Verdict:
    """The run's verdict and the per-role ones: `verdict` kv-bound | transfer-bound | queue-bound | <role>-bound |
    none | idle | not enough data."""

    verdict: str
    role: str | None = None
    evidence: list[str] = field(default_factory=list)
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: int = 0

    def document(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "role": self.role, "evidence": list(self.evidence), "roles": self.roles,
                "samples": self.samples}


def judge(samples: list[Sample], *, min_samples: int = MIN_SAMPLES, share: float = 1.0,
          whole: Sample | None = None) -> Verdict:
    """The verdict over SAMPLES (oldest first). A gauge rule fires when it holds in at least SHARE of the loaded
    samples (every one by default: `status --watch`; bench serve's level, whose ramp-up and drain are in its
    window, asks half); a window rule when it holds over WHOLE (one sample spanning the window), else in any
    loaded sample. The evidence is that of the latest sample where it held."""
    loaded = [s for s in samples if s.loaded]
    if len(samples) < min_samples:
        return Verdict("not enough data", evidence=[f"{len(samples)} sample(s) of {min_samples} needed"],
                       samples=len(samples))
    if not loaded:
        return Verdict("idle", evidence=["no request ran or waited in the window"], samples=len(samples))
    if len(loaded) < min_samples:
        return Verdict("not enough data", evidence=[f"load in {len(loaded)} sample(s) of {min_samples} needed"],
                       samples=len(samples))
    roles: dict[str, dict[str, Any]] = {}
    found: Verdict | None = None
    for _name, check, kind in RULES:
        if kind == "window" and whole is not None:
            held = [r for r in [check(whole)] if r is not None]
        else:
            results = [check(s) for s in loaded]
            held = [r for r in results if r is not None]
            if kind == "gauge" and len(held) < share * len(results):
                held = []
        if held:
            last = held[-1]
            roles.setdefault(last.role, {"verdict": last.verdict, "evidence": last.evidence})
            if found is None:
                found = Verdict(last.verdict, last.role, list(last.evidence))
    for role in loaded[-1].roles:
        roles.setdefault(role, {"verdict": "none", "evidence": []})
    out = found or Verdict("none", evidence=_healthy_evidence(whole if whole is not None else loaded[-1]))
    out.roles, out.samples = roles, len(samples)
    return out


def _healthy_evidence(s: Sample) -> list[str]:
    parts = []
    for role, r in s.roles.items():
        kv = "?" if r.kv_usage is None else f"{100 * r.kv_usage:.0f}%"
        rate = _tok_s(r.prompt_tokens_per_s if role == "prefill" else r.generation_tokens_per_s)
        kind = "prompt" if role == "prefill" else "output"
        parts.append(f"{role}: {r.running or 0} running, {r.queued or 0} queued, KV {kv}, {rate} {kind} tok/s")
    out = ["load without a limit reached: " + "; ".join(parts)]
    pre, dec = s.roles.get("prefill"), s.roles.get("decode")
    if pre is not None and dec is not None and pre.transfer_p50_ms is not None and dec.ttft_p50_ms:
        out.append(f"KV transfer p50 {pre.transfer_p50_ms:.0f} ms over {pre.transfers} transfer(s), decode TTFT p50 "
                   f"{dec.ttft_p50_ms:.0f} ms")
    return out


def _tok_s(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"
