"""The sanity rules of a measured point: a benchmark that "succeeded" while measuring nothing, or something else,
must fail (exit 1), not warn. Rules as data (RULES: name -> check), each a small pure function over one point.

- zero-tokens: requests completed and not one token was generated, or completed requests never received a
  token at all (an engine answering with nothing "succeeds" with excellent latencies; srt-slurm#429). The
  second is what SGLang's tool hides: a streamed answer without text leaves TTFT 0 and the output length at the
  REQUESTED length, so its own counts look right.
- concurrency-not-reached: the measured requests never had the asked concurrency in flight at once (fewer
  requests than slots, a request rate too low, a client that cannot keep up): the point measured a lighter
  load than its label says. The peak is counted by pdctl's driver around the tool's request function.
- no-warmup: no warm-up request was sent (or none succeeded) before measuring: the first measured requests
  pay one-off set-up (the first NIXL/UCX transfer's connection and registration, lazy kernels).
- server-disagrees: the servers' own counters (pdctl.bench.serve.servercounts) did not grow by what the
  client says was served, warm-up included: requests, and with token-exact APIs prompt and output tokens.
  When the servers' counters cannot be read the point says so (`server.checked` false) and is not failed
  for it: most SGLang deployments run without --enable-metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rule = Callable[[Any, bool], "str | None"]


def zero_tokens(m: Any, _exact: bool) -> str | None:
    if m.completed and m.output_tokens == 0:
        return f"{m.completed} requests completed but 0 output tokens were generated"
    if m.tokenless:
        return (f"{m.tokenless} of {m.completed} completed requests never received a token (TTFT 0; the tool then "
                "counts the requested length as generated)")
    return None


def concurrency_not_reached(m: Any, _exact: bool) -> str | None:
    asked = m.point.concurrency
    peak = (m.client or {}).get("peak_in_flight")
    if m.client is None:
        return "the driver did not report how many requests were in flight: concurrency not verified"
    if peak < asked:
        return (f"requested concurrency {asked} was never reached: at most {peak} measured request(s) were in "
                f"flight at once ({m.point.requests} requests; fewer requests than slots, a request rate too low, "
                "or a client that cannot keep up)")
    return None


def no_warmup(m: Any, _exact: bool) -> str | None:
    warm = (m.client or {}).get("warmup") or {}
    if not warm.get("sent"):
        return ("no warm-up request was sent before measuring: the first requests pay one-off set-up (the first "
                "NIXL/UCX transfer, lazy kernels); use --warmup 1 or more")
    if not warm.get("ok"):
        return f"none of the {warm['sent']} warm-up request(s) succeeded"
    return None


def server_disagrees(m: Any, exact: bool) -> str | None:
    server = m.server or {}
    if not server.get("checked") or m.errors:
        return None  # not readable (said in the document), or failed requests the servers may count either way
    got, want = server["delta"], expected_server_counts(m, exact)
    wrong = [f"{name} {got[name]} (client: {value})" for name, value in want.items() if got.get(name) != value]
    if wrong:
        return ("the servers' own metrics disagree with the client's counts (warm-up included): servers counted "
                + ", ".join(wrong))
    return None


def expected_server_counts(m: Any, exact: bool) -> dict[str, int]:
    """What the counting servers' counters must have grown by during M's point: every completed measured
    request and every successful warm-up; token counts only with a token-exact API (/generate)."""
    warm = (m.client or {}).get("warmup") or {}
    want = {"requests": m.completed + int(warm.get("ok") or 0)}
    if exact:
        want["prompt_tokens"] = m.input_tokens + int(warm.get("prompt_tokens") or 0)
        want["generation_tokens"] = m.output_tokens + int(warm.get("output_tokens") or 0)
    return want


RULES: dict[str, Rule] = {"zero-tokens": zero_tokens, "concurrency-not-reached": concurrency_not_reached,
                          "no-warmup": no_warmup, "server-disagrees": server_disagrees}


def sanity_problems(m: Any, *, exact: bool) -> list[str]:
    """Every rule that fires on M, as `rule: message`."""
    return [f"{name}: {text}" for name, rule in RULES.items() if (text := rule(m, exact)) is not None]
