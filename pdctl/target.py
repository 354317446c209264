"""The one resolver of a deployment target, shared by `pdctl eval`, `parity` and `bench serve`: a URL given
directly (with the servers behind it), or a `pdctl launch` run dir (its router, its prefill and decode
servers, its state), checked to answer — and a run's processes to be alive (pdctl.liveness) — before any work
starts.

Why more than a URL: a cold parity comparison needs *every* cache of the deployment empty (prefill's prefix
cache and decode's), and a warm one needs decode's empty but prefill's kept, so the prefill and decode servers
behind a router are part of the target. A run dir's state.json names them; with a bare URL the user may name
decode servers (--decode-url), else the router's GET /workers lists them — a PD router's prefill and decode
workers, a regular router's plain (colocated) servers, each with what the router read from its /server_info
(without either, warm flushes nothing between its two sends, and cold flushes through the URL itself — SGLang's
router forwards /flush_cache to every worker). Parity reads each server's TP through these (pdctl.parity.splits).
A deployment launched for one command (parity's --reference-topology, bench serve's --control-topology) is
pdctl.launch.scoped's; it yields a Target too.
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
    colocated_urls: list[str] = field(default_factory=list)  # plain servers behind the URL (a regular router's)
    worker_meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # URL -> what its router says of it
    run_dir: Path | None = None  # the pdctl run it is (None: a URL given directly)
    state: dict[str, Any] = field(default_factory=dict)  # that run's state.json

    @property
    def cold_flush_urls(self) -> list[str]:
        return self.flush_all or [self.url]

    @property
    def info_url(self) -> str:
        """Where to read /server_info: a prefill server, else a plain server behind the URL (a router's own answer
        varies by version, and a regular sglang-router's does not describe its workers)."""
        return (self.prefill_urls or self.colocated_urls or [self.url])[0]


def _strip(url: str) -> str:
    return url.rstrip("/")


def target_from_url(url: str, *, decode_urls: tuple[str, ...] = (), prefill_urls: tuple[str, ...] = (),
                    workers: Workers | None = None) -> Target:
    """A --candidate/--reference URL, with the decode (and prefill) servers behind it when the user names them,
    or the plain servers a regular router fronts (WORKERS: what its GET /workers listed)."""
    decode = [_strip(u) for u in decode_urls]
    prefill = [_strip(u) for u in prefill_urls]
    flush_all = prefill + decode if prefill else []
    if decode and not prefill:
        flush_all = [_strip(url)] + decode  # the router flushes its workers; flushing decode again is harmless
    colocated = list(workers.regular) if workers is not None and not (prefill or decode) else []
    meta = dict(workers.metadata) if workers is not None else {}
    return Target(url=_strip(url), flush_all=flush_all or list(colocated), flush_decode=decode, prefill_urls=prefill,
                  colocated_urls=colocated, worker_meta=meta)


@dataclass(frozen=True)
class Workers:
    """What an sglang-router's GET /workers lists: PD workers by type, a regular router's plain servers, and
    what the router read from each one's /server_info (`metadata`: tp_size, dp_size, ... as strings)."""

    prefill: list[str] = field(default_factory=list)
    decode: list[str] = field(default_factory=list)
    regular: list[str] = field(default_factory=list)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


def discover_workers(workers_doc: dict[str, Any] | None) -> Workers:
    """The workers an sglang-router's GET /workers answer lists (sglang-router 0.3.2: `{"workers": [{"url",
    "worker_type": "prefill"|"decode"|"regular", "metadata": {...}}, ...]}`); empty when it is not a router."""
    found = Workers()
    for worker in (workers_doc or {}).get("workers") or []:
        if not isinstance(worker, dict) or not isinstance(worker.get("url"), str):
            continue
        url = _strip(worker["url"])
        kind = worker.get("worker_type")
        if kind in ("prefill", "decode", "regular"):
            getattr(found, kind).append(url)
            if isinstance(worker.get("metadata"), dict):
                found.metadata[url] = dict(worker["metadata"])
    return found


def target_from_state(state: dict[str, Any], *, where: str = "run") -> Target:
    """The deployment a pdctl run dir describes: its router, and its prefill and decode processes."""
    processes = [p for p in state.get("processes") or [] if isinstance(p, dict) and p.get("url")]
    prefill = [_strip(p["url"]) for p in processes if p.get("role") == "prefill"]
    decode = [_strip(p["url"]) for p in processes if p.get("role") == "decode"]
    colocated = [_strip(p["url"]) for p in processes if p.get("role") == "colocated"]
    router = (state.get("router") or {}).get("url")
    if router:
        url = _strip(router)
    elif processes:
        url = _strip(processes[0]["url"])  # a colocated reference: one server, no router
    else:
        raise UserError(f"{where} has neither a router URL nor process URLs in its state")
    everything = [_strip(p["url"]) for p in processes]
    return Target(url=url, flush_all=everything, flush_decode=decode, prefill_urls=prefill, colocated_urls=colocated)


def target_from_run_dir(run_dir: str | Path | None) -> Target:
    """The deployment of a `pdctl launch` run (RUN_DIR, or the latest run when None), with its run dir and state."""
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    return replace(target_from_state(state, where=f"run {path}"), run_dir=path, state=state)


def url_target(url: str, *, decode_urls: tuple[str, ...] = (), prefill_urls: tuple[str, ...] = ()) -> Target:
    """A URL with the servers behind it: those named, else those its router lists (GET /workers) — a PD router's
    prefill and decode, so that warm flushes only decode and server facts come from a prefill, as with a run
    dir; a regular router's plain servers, so that server facts (TP, page size) come from them."""
    if decode_urls or prefill_urls:
        return target_from_url(url, decode_urls=decode_urls, prefill_urls=prefill_urls)
    workers = discover_workers(get_json(url, "/workers"))
    if workers.prefill and workers.decode:
        return target_from_url(url, decode_urls=tuple(workers.decode), prefill_urls=tuple(workers.prefill),
                               workers=workers)
    return target_from_url(url, workers=workers)


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
