"""What the user asked `pdctl suggest` for, checked and resolved before anything is computed (bad input: exit 2).

From the command line (`--model --system --gpus`) or a topology skeleton (its model, its nodes' GPU kind and
count, engine.version, transfer backend and KV settings), plus the request shape (ISL/OSL), the targets
(TTFT, ITL) and the link. Every refusal names the choices, so the next try is the right one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pdctl.errors import UserError
from pdctl.models import resolve_model_spec
from pdctl.models.presets import PRESETS
from pdctl.models.spec import ModelSpec
from pdctl.sglang.versions import DEFAULT_VERSION, parse_version, release, table_versions
from pdctl.suggest import link
from pdctl.suggest.deployment import default_skeleton, topology_name
from pdctl.suggest.kv import KvShape
from pdctl.suggest.link import Link
from pdctl.suggest.names import MODELS, SYSTEMS, ModelName, find_model
from pdctl.topology import load_topology
from pdctl.transfer import registry
from pdctl.transfer.registry import DEFAULT as DEFAULT_BACKEND

MIN_GPUS = 2  # one prefill and one decode GPU
MAX_GPUS = 1024
MAX_TOKENS = 1 << 20


@dataclass
class SuggestRequest:
    """The options of `pdctl suggest` (None: not given)."""

    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float
    model: str | None = None
    system: str | None = None
    gpus: int | None = None
    topology: str | None = None
    backend: str | None = None
    version: str | None = None
    link_gbps: float | None = None
    us_per_descriptor: float | None = None
    transfer_from: str | None = None
    top: int = 10


@dataclass
class Inputs:
    """A checked request: everything the suggestion is computed from."""

    model: ModelName
    spec: ModelSpec
    system: str  # pdctl GPU kind
    gpus: int
    isl: int
    osl: int
    ttft_ms: float
    itl_ms: float
    backend: str
    version: str
    link: Link
    skeleton: dict[str, Any]
    kv_shape: KvShape
    top: int = 10
    source: str | None = None  # the skeleton file, if any

    @property
    def aic_system(self) -> str:
        return SYSTEMS[self.system][0]

    @property
    def gpus_per_node(self) -> int:
        return SYSTEMS[self.system][1]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model.preset, "aic_model": self.model.aic, "system": self.system,
                "aic_system": self.aic_system, "gpus": self.gpus, "isl": self.isl, "osl": self.osl,
                "ttft_ms": self.ttft_ms, "itl_ms": self.itl_ms, "backend": self.backend, "sglang": self.version,
                "topology": self.source}


def _choices(values: Any) -> str:
    return ", ".join(sorted(values))


def check_version(version: str) -> str:
    """VERSION if pdctl has SGLang's rules for it (a flag table of that release), else exit 2 with the list."""
    known = table_versions()
    parsed = parse_version(version)
    if parsed is not None and any(release(v)[:3] == parsed[:3] for v in known):
        return version
    raise UserError(f"unknown SGLang version {version!r}: pdctl has SGLang's rules for {', '.join(known)} "
                    "(give one of them with --version, or engine.version in the topology)")


def check_numbers(req: SuggestRequest) -> None:
    """Request shape and targets: positive, finite, in range (exit 2 otherwise)."""
    for name, value, low in (("--isl", req.isl, 1), ("--osl", req.osl, 2)):
        if not isinstance(value, int) or not low <= value <= MAX_TOKENS:
            raise UserError(f"{name} must be a whole number of tokens in [{low}, {MAX_TOKENS}], got {value}")
    for name, value in (("--ttft", req.ttft_ms), ("--itl", req.itl_ms)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UserError(f"impossible target {name} {value}: a latency target is a positive number of ms")
    if req.top < 1:
        raise UserError(f"--top must be at least 1, got {req.top}")
    if req.gpus is not None and not MIN_GPUS <= req.gpus <= MAX_GPUS:
        raise UserError(f"too few GPUs: --gpus {req.gpus}; a PD deployment needs at least {MIN_GPUS} (one prefill, "
                        "one decode)" if req.gpus < MIN_GPUS else f"--gpus {req.gpus}: at most {MAX_GPUS}")


def _link(req: SuggestRequest, system: str) -> Link:
    if req.transfer_from is not None and (req.link_gbps is not None or req.us_per_descriptor is not None):
        raise UserError("give either --transfer-from (a measurement) or --link-gbps / --us-per-descriptor, not both")
    if req.transfer_from is not None:
        return link.from_file(req.transfer_from)
    if req.link_gbps is not None:
        return link.given(req.link_gbps, req.us_per_descriptor)
    base = link.nominal(system)
    if req.us_per_descriptor is not None:
        return link.given(base.gbps, req.us_per_descriptor, source=f"nominal {system} NIC, --us-per-descriptor")
    return base


def _from_topology(req: SuggestRequest) -> tuple[dict[str, Any], Any, str, int]:
    """(raw skeleton, loaded topology, GPU kind, GPUs) of the skeleton file."""
    if req.model is not None or req.system is not None:
        raise UserError("with a TOPOLOGY the model and the GPUs are the topology's: drop --model / --system "
                        "(--gpus may cap the GPUs used)")
    topo = load_topology(req.topology)
    topo.require_pd("suggest")
    kinds = {topo.node(n).gpu for r in topo.roles() for n in r.nodes}
    if len(kinds) != 1 or next(iter(kinds)) not in SYSTEMS:
        raise UserError(f"{req.topology}: suggest needs the roles' nodes to be GPUs of one kind, one of "
                        f"{_choices(SYSTEMS)}; found {_choices(kinds)}")
    system = next(iter(kinds))
    total = sum(n.gpus for n in topo.nodes if n.gpu == system)
    if req.gpus is not None and req.gpus > total:
        raise UserError(f"--gpus {req.gpus}: the topology's {system} nodes have {total} GPUs")
    raw = yaml.safe_load(Path(req.topology).read_text(encoding="utf-8"))
    return raw, topo, system, req.gpus or total


def resolve(req: SuggestRequest) -> Inputs:
    """Check REQ and resolve it (UserError, exit 2, on anything a user must change)."""
    check_numbers(req)
    if req.topology is not None:
        skeleton, topo, system, gpus = _from_topology(req)
        name = find_model(topo.model.preset or "") or find_model(str(topo.model.path))
        if name is None:
            raise UserError(f"{req.topology}: model {topo.model.path!r} is not one pdctl can suggest for; "
                            f"models: {_choices(MODELS)} (model.preset or model.path)")
        spec = resolve_model_spec(topo.model, engine_kind="sglang")
        version = check_version(req.version or topo.engine.version or DEFAULT_VERSION)
        backend = req.backend or topo.transfer.backend
        skeleton["engine"] = {**(skeleton.get("engine") or {}), "kind": "sglang", "version": version}
        skeleton["transfer"] = {**(skeleton.get("transfer") or {}), "backend": backend}
        pre = topo.prefill
        shape = KvShape(spec, req.isl, pre.page_size, pre.kv_cache_dtype,
                        bool(pre.hybrid_swa_memory and topo.decode.hybrid_swa_memory), pre.chunked_prefill_size,
                        bool(topo.transfer.staging_buffer))
    else:
        missing = [o for o, v in (("--model", req.model), ("--system", req.system), ("--gpus", req.gpus)) if v is None]
        if missing:
            raise UserError(f"give a TOPOLOGY skeleton, or {', '.join(missing)} (with --model, --system, --gpus)")
        name = find_model(str(req.model))
        if name is None:
            raise UserError(f"unknown model {req.model!r}; models: {_choices(MODELS)} (or their Hugging Face ids)")
        if req.system not in SYSTEMS:
            raise UserError(f"unknown system {req.system!r}; systems: {_choices(SYSTEMS)}")
        system, gpus = str(req.system), int(req.gpus or 0)
        spec = PRESETS[name.preset]
        version = check_version(req.version or DEFAULT_VERSION)
        backend = req.backend or DEFAULT_BACKEND
        skeleton = default_skeleton(name=topology_name(f"{name.preset}-{system}-suggested"), system=system,
                                    gpus=gpus, gpus_per_node=SYSTEMS[system][1], model_path=name.hf,
                                    preset=name.preset, version=version, backend=backend)
        shape = KvShape(spec, req.isl)
    registry.backend(backend)  # an unknown one: UserError naming the registry's backends
    return Inputs(model=name, spec=spec, system=system, gpus=gpus, isl=req.isl, osl=req.osl, ttft_ms=float(req.ttft_ms),
                  itl_ms=float(req.itl_ms), backend=backend, version=version, link=_link(req, system),
                  skeleton=skeleton, kv_shape=shape, top=req.top, source=req.topology)
