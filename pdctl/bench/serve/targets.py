"""The deployments a sweep runs against: where requests go, how many GPUs serve them, which tokenizer counts.

A deployment is a URL (usually the router) given directly, a `pdctl launch` run dir (its router, and the
launched topology for GPUs and `bench:` defaults) — both resolved by pdctl.target, as eval and parity do — or,
for the control, a topology launched for the run and torn down afterwards, exactly as `pdctl parity
--reference-topology` does (pdctl.launch.scoped).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.bench.serve.tokenizer import write_byte_tokenizer
from pdctl.errors import UserError
from pdctl.jsonfiles import read_json_object
from pdctl.launch.scoped import launched_reference
from pdctl.metrics.targets import router_target
from pdctl.runs import DEPLOYMENT_FILE
from pdctl.runs.lock import lock_pointer
from pdctl.runs.state import TOPOLOGY_COPY
from pdctl.target import Target, get_json, resolve
from pdctl.topology import load_topology

REFERENCE_MODEL_TYPE = "pdctl-reference"


@dataclass(frozen=True)
class Side:
    """One side of the comparison."""

    label: str  # "candidate" | "control"
    url: str
    gpus: int | None
    source: str  # how it was given: the URL, run dir or topology file
    topology: Any | None = None  # the loaded Topology when known
    run_dir: Path | None = None  # the launched run behind it (its processes are watched: pdctl.liveness)
    unit: str = "GPU"  # what `gpus` counts: "GPU", or "CPU rank" for the CPU reference engine
    count_urls: tuple[str, ...] = ()  # the servers that count each request once (counting_urls)
    servers: tuple[tuple[str, str], ...] = ()  # (role, URL) of every server behind it (role_urls)
    router_metrics: str | None = None  # the router's Prometheus URL, known for a launched run

    def document(self) -> dict[str, Any]:
        return {"url": self.url, "gpus": self.gpus, "unit": self.unit, "source": self.source,
                "topology": getattr(self.topology, "name", None), "lock": lock_pointer(self.run_dir)}

    def devices(self) -> str:
        """'8 GPUs', '3 CPU ranks', '? GPUs': what serves it, for titles."""
        return f"{self.gpus or '?'} {self.unit}{'' if self.gpus == 1 else 's'}"


def counting_urls(target: Target) -> tuple[str, ...]:
    """The servers whose counters see each request exactly once (pdctl.bench.serve.servercounts): the decode
    servers of a PD deployment (its prefill servers count every request too), every server of a colocated run,
    else the URL itself (one server; a colocated router serves no engine metrics and is then reported unread)."""
    if target.flush_decode:
        return tuple(target.flush_decode)
    if target.flush_all and not target.prefill_urls:
        return tuple(target.flush_all)
    return (target.url,)


def role_urls(target: Target) -> tuple[tuple[str, str], ...]:
    """(role, URL) of every server behind TARGET: its prefill and decode servers, else every server of a
    colocated run, else the URL itself (a colocated role)."""
    if target.prefill_urls or target.flush_decode:
        return (*(("prefill", u) for u in target.prefill_urls), *(("decode", u) for u in target.flush_decode))
    return tuple(("colocated", u) for u in (target.flush_all or [target.url]))


def _sides_of(target: Target) -> dict[str, Any]:
    """The Side fields every kind of target fills the same way."""
    return {"count_urls": counting_urls(target), "servers": role_urls(target)}


def unit_of(topo: Any = None, url: str | None = None) -> str:
    """What a deployment's `gpus` counts: CPU ranks for pdctl's CPU reference engine (every node `gpu: cpu`, or
    a server whose /model_info says model_type pdctl-reference), else GPUs."""
    if topo is not None:
        return "CPU rank" if all(n.gpu == "cpu" for n in topo.nodes) else "GPU"
    info = get_json(url, "/model_info", "/get_model_info") if url else None
    return "CPU rank" if (info or {}).get("model_type") == REFERENCE_MODEL_TYPE else "GPU"


def topology_gpus(topo: Any) -> int:
    """GPUs a topology uses: its `bench.serve.gpus`, else tp x pp x replicas summed over its roles."""
    bench = getattr(topo, "bench", None)
    if bench is not None and bench.serve.gpus:
        return int(bench.serve.gpus)
    return sum(role.tp * role.pp * role.replicas for role in topo.roles())


def _server_gpus(url: str) -> int | None:
    info = get_json(url, "/server_info", "/get_server_info") or {}
    tp, pp = info.get("tp_size"), info.get("pp_size") or 1
    return tp * pp if isinstance(tp, int) and isinstance(pp, int) and tp > 0 else None


def discovered_gpus(url: str) -> int | None:
    """GPUs behind URL as its servers report them: a router's workers (GET /workers) each reporting tp_size x
    pp_size in /server_info, or the server itself; None when any of them does not say."""
    workers = (get_json(url, "/workers") or {}).get("workers") or []
    urls = [w["url"] for w in workers if isinstance(w, dict) and isinstance(w.get("url"), str)]
    counts = [_server_gpus(u) for u in (urls or [url])]
    return None if not counts or any(c is None for c in counts) else sum(c for c in counts if c is not None)


def from_url(label: str, url: str, gpus: int | None) -> Side:
    """A deployment given by URL (UserError when it does not answer)."""
    target = resolve(url, None, what=f"--{'url' if label == 'candidate' else 'control-url'}")
    url = target.url
    return Side(label, url, gpus if gpus is not None else discovered_gpus(url), url, unit=unit_of(url=url),
                **_sides_of(target))


def from_run_dir(run_dir: str | None, gpus: int | None) -> Side:
    """The router of a `pdctl launch` run (the latest when RUN_DIR is None), with its launched topology."""
    target = resolve(None, run_dir, doing="bench serve")  # a dead worker is named now, not as failed requests
    path = target.run_dir
    assert path is not None
    topo = None
    copy = path / TOPOLOGY_COPY
    if copy.is_file():
        topo = load_topology(copy)
    count = gpus if gpus is not None else (topology_gpus(topo) if topo is not None else discovered_gpus(target.url))
    router = router_target(target.state, _plan(path)).url
    return Side("candidate", target.url, count, str(path), topo, run_dir=path,
                unit=unit_of(topo) if topo is not None else unit_of(url=target.url), router_metrics=router,
                **_sides_of(target))


def with_topology(side: Side, topology_file: str, gpus: int | None) -> Side:
    """SIDE with the bench defaults and GPU count of TOPOLOGY_FILE (`--topology` next to `--url`)."""
    if not Path(topology_file).is_file():
        raise UserError(f"--topology {topology_file}: no such file")
    topo = load_topology(topology_file)
    return Side(side.label, side.url, gpus if gpus is not None else topology_gpus(topo), side.source, topo,
                run_dir=side.run_dir, unit=unit_of(topo), count_urls=side.count_urls, servers=side.servers,
                router_metrics=side.router_metrics)


@contextlib.contextmanager
def launched_control(topology_file: str, *, timeout: float, gpus: int | None) -> Iterator[Side]:
    """The control topology launched for the block (pdctl.launch), torn down afterwards whatever happens."""
    if not Path(topology_file).is_file():
        raise UserError(f"--control-topology {topology_file}: no such file")
    topo = load_topology(topology_file)  # bad topology: exit 2 before anything is launched
    with launched_reference(topology_file, timeout=timeout) as target:
        yield Side("control", target.url, gpus if gpus is not None else topology_gpus(topo),
                   topology_file, topo, unit=unit_of(topo), **_sides_of(target))


def tokenizer_for(url: str, explicit: str | None, work_dir: Path) -> str:
    """The tokenizer the tool counts with: EXPLICIT; else, for pdctl's reference engine (its /model_info says
    model_type pdctl-reference), a written copy of its byte tokenizer; else the path the server reports."""
    if explicit:
        return explicit
    info = get_json(url, "/model_info", "/get_model_info") or {}
    if info.get("model_type") == REFERENCE_MODEL_TYPE:
        return str(write_byte_tokenizer(work_dir / "byte-tokenizer"))
    found = info.get("tokenizer_path") or info.get("model_path")
    if not isinstance(found, str) or not found:
        raise UserError(f"{url} does not say which tokenizer it uses (/model_info): pass --tokenizer PATH_OR_ID")
    return found


def _plan(run_dir: Path) -> dict[str, Any] | None:
    """The run's plan.json (where the router's metrics port is), or None."""
    try:
        return read_json_object(run_dir / DEPLOYMENT_FILE, "the run's plan.json")
    except (UserError, OSError):
        return None
