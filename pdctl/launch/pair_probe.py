"""After `pdctl restart` of one role of a PD pair: prove a generate whose KV crosses the link, pair by pair.

/health and the router's health checks say each server answers, not that the two can still move KV: replacing
one role of a NIXL pair left both healthy and nothing served (sglang#33789, reported on 0.5.16-0.5.17; the new
process's agent is unknown to the peer that kept the old one's metadata). So the restart sends, for every pair
the restarted replica can form (the router pairs any prefill with any decode), one request the way the router
sends it: the same body with bootstrap_host / bootstrap_port / bootstrap_room to the prefill and to the decode
at once. The decode can only answer after the prefill's KV reached it; a failure or no answer in time names
the pair and says that the peer must restart too.
"""

from __future__ import annotations

import random
import secrets
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

PROBE_TIMEOUT_S = 60.0  # per pair, at most; restart gives each what is left of its --timeout
MIN_PROBE_S = 10.0
REPORT = "https://github.com/sgl-project/sglang/issues/33789"


@dataclass(frozen=True)
class Pair:
    """One prefill replica's leader and one decode replica's leader, by name and URL, with the prefill's
    bootstrap server."""

    prefill: str
    prefill_url: str
    bootstrap_port: int
    decode: str
    decode_url: str

    @property
    def bootstrap_host(self) -> str:
        return urlsplit(self.prefill_url).hostname or ""

    @property
    def words(self) -> str:
        return f"{self.prefill} -> {self.decode}"


def _flag(argv: list[str], flag: str) -> str | None:
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag), None)


def pairs_of(specs: list[Any], role: str, replica: int) -> list[Pair]:
    """Every (prefill, decode) pair of serving leaders (url set) that includes ROLE:REPLICA; [] outside PD."""
    if role not in ("prefill", "decode"):
        return []
    heads = [s for s in specs if s.url and s.role in ("prefill", "decode")]
    prefills = [s for s in heads if s.role == "prefill" and (role != "prefill" or s.replica == replica)]
    decodes = [s for s in heads if s.role == "decode" and (role != "decode" or s.replica == replica)]
    out = []
    for p in prefills:
        port = _flag(p.argv, "--disaggregation-bootstrap-port")
        if port is None or not port.isdigit():
            continue
        out += [Pair(p.name, p.url.rstrip("/"), int(port), d.name, d.url.rstrip("/")) for d in decodes]
    return out


def probe(pair: Pair, *, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the decode of PAIR answered a generate whose KV came from its prefill; else what went wrong."""
    body = {"text": f"pdctl restart link probe {secrets.token_hex(8)}: one, two,",  # fresh: no cached prefix
            "sampling_params": {"temperature": 0, "max_new_tokens": 4},
            "bootstrap_host": pair.bootstrap_host, "bootstrap_port": pair.bootstrap_port,
            "bootstrap_room": random.getrandbits(63)}
    prefill_error: list[str] = []

    def send_prefill() -> None:
        try:
            answer = requests.post(pair.prefill_url + "/generate", json=body, timeout=timeout)
            if answer.status_code != 200:
                prefill_error.append(f"prefill answered HTTP {answer.status_code}: {answer.text[:200]}")
        except requests.RequestException as exc:
            prefill_error.append(f"prefill: {type(exc).__name__}")

    thread = threading.Thread(target=send_prefill, daemon=True)
    thread.start()
    try:
        answer = requests.post(pair.decode_url + "/generate", json=body, timeout=timeout)
    except requests.Timeout:  # the prefill's request (a daemon thread) ends with its own timeout
        return f"no answer from the decode within {timeout:g} s (the KV never arrived)"
    except requests.RequestException as exc:
        return f"decode: {type(exc).__name__}"
    thread.join(timeout)  # the decode answered: the prefill has finished its part or does so now
    if answer.status_code != 200:
        return f"decode answered HTTP {answer.status_code}: {answer.text[:200]}"
    try:
        doc = answer.json()
    except ValueError:
        return "decode answered no JSON"
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str) or "error" in doc:
        return f"decode answered without a generation: {str(doc)[:200]}"
    return prefill_error[0] if prefill_error else None


def peer_advice(pair: Pair, restarted: str, backend: str | None) -> str:
    """What to do when PAIR failed after RESTARTED came back: restart the other side of the pair too."""
    peer = pair.decode if restarted == pair.prefill else pair.prefill
    role, _, replica = peer.rpartition("-")
    why = (f"on NIXL the peer can keep the replaced process's agent and serve nothing ({REPORT}, reported on "
           "SGLang 0.5.16-0.5.17)" if backend == "nixl" else "the peer still holds the old process's connection")
    return f"restart the peer too: `pdctl restart {role}:{replica} --force` — {why}"
