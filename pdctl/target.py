"""The one resolver of a deployment target, shared by `pdctl eval`, `parity` and `bench serve`: a URL given
directly (with the servers behind it), or a `pdctl launch` run dir (its router, its prefill and decode
servers, its state), checked to answer — and a run's processes to be alive (pdctl.liveness) — before any work
starts.

Why more than a URL: a cold parity comparison needs *every* cache of the deployment empty (prefill's prefix
cache and decode's), and a warm one needs decode's empty but prefill's kept, so the prefill and decode servers
behind a router are part of the target. A run dir's state.json names them; with a bare URL the user may name
decode servers (--decode-url), else a PD router's GET /workers lists them (without either, warm flushes nothing
between its two sends, and cold flushes through the URL itself — SGLang's router forwards /flush_cache to every
worker). A deployment launched for one command (parity's --reference-topology, bench serve's
--control-topology) is pdctl.launch.scoped's; it yields a Target too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import requests

from pdctl.errors import UserError
from pdctl.liveness import require_alive
from pdctl.runs import read_state, resolve_run_dir

INFO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Target:
    """A deployment a command talks to: the URL requests go to, what to flush for cold, what to flush for warm,
    and the run it is when it was launched by pdctl."""

    url: str
    flush_all: list[str] = field(default_factory=list)  # cold: every cache (empty = flush `url` itself)
    flush_decode: list[str] = field(default_factory=list)  # warm: decode caches only (empty = none)
    prefill_urls: list[str] = field(default_factory=list)
    run_dir: Path | None = None  # the pdctl run it is (None: a URL given directly)
    state: dict[str, Any] = field(default_factory=dict)  # that run's state.json

    @property
    def cold_flush_urls(self) -> list[str]:
        return self.flush_all or [self.url]

    @property
    def info_url(self) -> str:
        """Where to read /server_info: a prefill server (the router's own answer varies by version)."""
        return self.prefill_urls[0] if self.prefill_urls else self.url


def _strip(url: str) -> str:
    return url.rstrip("/")


def target_from_url(url: str, *, decode_urls: tuple[str, ...] = (), prefill_urls: tuple[str, ...] = ()) -> Target:
    """A --candidate/--reference URL, with the decode (and prefill) servers behind it when the user names them."""
    decode = [_strip(u) for u in decode_urls]
    prefill = [_strip(u) for u in prefill_urls]
    flush_all = prefill + decode if prefill else []
    if decode and not prefill:
        flush_all = [_strip(url)] + decode  # the router flushes its workers; flushing decode again is harmless
    return Target(url=_strip(url), flush_all=flush_all, flush_decode=decode, prefill_urls=prefill)


def discover_workers(workers_doc: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(prefill URLs, decode URLs) from an sglang-router's GET /workers answer (empty when not a PD router)."""
    prefill: list[str] = []
    decode: list[str] = []
    for worker in (workers_doc or {}).get("workers") or []:
        if not isinstance(worker, dict) or not isinstance(worker.get("url"), str):
            continue
        kind = worker.get("worker_type")
        if kind == "prefill":
            prefill.append(_strip(worker["url"]))
        elif kind == "decode":
            decode.append(_strip(worker["url"]))
    return prefill, decode


def target_from_state(state: dict[str, Any], *, where: str = "run") -> Target:
    """The deployment a pdctl run dir describes: its router, and its prefill and decode processes."""
    processes = [p for p in state.get("processes") or [] if isinstance(p, dict) and p.get("url")]
    prefill = [_strip(p["url"]) for p in processes if p.get("role") == "prefill"]
    decode = [_strip(p["url"]) for p in processes if p.get("role") == "decode"]
    router = (state.get("router") or {}).get("url")
    if router:
        url = _strip(router)
    elif processes:
        url = _strip(processes[0]["url"])  # a colocated reference: one server, no router
    else:
        raise UserError(f"{where} has neither a router URL nor process URLs in its state")
    everything = [_strip(p["url"]) for p in processes]
    return Target(url=url, flush_all=everything, flush_decode=decode, prefill_urls=prefill)


def target_from_run_dir(run_dir: str | Path | None) -> Target:
    """The deployment of a `pdctl launch` run (RUN_DIR, or the latest run when None), with its run dir and state."""
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    return replace(target_from_state(state, where=f"run {path}"), run_dir=path, state=state)


def url_target(url: str, *, decode_urls: tuple[str, ...] = (), prefill_urls: tuple[str, ...] = ()) -> Target:
    """A URL with the servers behind it: those named, else those a PD router lists (GET /workers), so that warm
    flushes only decode and server facts come from a prefill, as with a run dir."""
    if not decode_urls and not prefill_urls:
        found_prefill, found_decode = discover_workers(get_json(url, "/workers"))
        if found_prefill and found_decode:
            prefill_urls, decode_urls = tuple(found_prefill), tuple(found_decode)
    return target_from_url(url, decode_urls=decode_urls, prefill_urls=prefill_urls)


def resolve(url: str | None, run_dir: str | Path | None, *, what: str | None = None, doing: str | None = None,
            decode_urls: tuple[str, ...] = (), prefill_urls: tuple[str, ...] = ()) -> Target:
    """The target of a command: URL when given (with the servers behind it), else the deployment of RUN_DIR (or
    the latest run). UserError (exit 2) when it does not answer at all; WHAT names it in that message (default
    for a run: "the router of run DIR"). DOING (the command, for a run dir): CheckFailed (exit 1) naming a
    dead process of the run with its log tail, before any request (the router would keep listing it)."""
    if url is not None:
        check_reachable(url, what or "--url")  # before asking it for its workers
        return url_target(url, decode_urls=decode_urls, prefill_urls=prefill_urls)
    if doing is not None:
        require_alive(resolve_run_dir(run_dir), doing)
    target = target_from_run_dir(run_dir)
    check_reachable(target.url, what or f"the router of run {target.run_dir}")
    return target


def get_json(url: str, *paths: str) -> dict[str, Any] | None:
    """The first of PATHS on URL that answers a JSON object (SGLang renamed /get_server_info to /server_info)."""
    for path in paths:
        try:
            response = requests.get(url.rstrip("/") + path, timeout=INFO_TIMEOUT_S)
        except requests.RequestException:
            continue
        if response.status_code == 200:
            try:
                doc = response.json()
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return None


def check_reachable(url: str, what: str) -> None:
    """Fail with exit 2 when a URL the user gave does not answer at all (CLI.md: unreachable URL = bad input)."""
    if not url.startswith(("http://", "https://")):
        raise UserError(f"{what} {url!r} is not an http(s) URL")
    try:
        requests.get(url.rstrip("/") + "/health", timeout=INFO_TIMEOUT_S)
    except requests.RequestException as exc:
        raise UserError(f"{what} {url} is unreachable: {exc}") from exc
