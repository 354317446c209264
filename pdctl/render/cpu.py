"""SGLang's real server on a CPU node (`gpu: cpu`, `engine.kind: sglang`): its command, flags and environment.

What differs from a GPU node, each measured on SGLang 0.5.23 (docs/sglang-on-cpu.md):
- the module: `python -m pdctl.sglang_cpu.serve` (SGLang's launch_server after pdctl's CPU adaptations,
  verified against SGLang's source) instead of `python -m sglang.launch_server`, with pdctl on PYTHONPATH;
  a GPU node's command never gets it;
- flags: `--device cpu`, torch-native attention and pytorch sampling (no GPU kernels), no grammar backend and no
  warm-up (neither runs offline here), a small static memory fraction and KV pool unless the topology sets
  them, `--sleep-on-idle` (an idle scheduler busy-polls a whole core without it; a CPU node's cores are its
  compute); in PD `--disable-overlap-schedule` (prefill's overlap path records `torch.cuda.Event()`,
  disaggregation/prefill.py:1496) and on decode `--disaggregation-decode-retraction-backup cpu_tensor` (the
  default host pool calls `torch.cuda.cudart()`, mem_cache/pool_host/common.py:147);
- environment: SGLANG_USE_CPU_ENGINE=1 (without it `--device cpu` is not SGLang's CPU engine), SGLANG_HOST_IP,
  SGLANG_CPU_OMP_THREADS_BIND for TP > 1 (one core list per rank: the rank slots are the cores;
  utils/numa_utils.py:463 asserts ranks <= NUMA nodes otherwise), bootstrap and waiting timeouts lowered to
  CPU_TIMEOUT_S (300 s each by default), Mooncake over TCP with room for SGLang's batches.
The topology's own keys and `engine.env` / the role's env win over every default here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.models import resolve_model_spec
from pdctl.sglang_cpu import NUMERICS_NOTE, SERVE_MODULE
from pdctl.sglang_stack.launcher import PDCTL_ROOT

if TYPE_CHECKING:
    from pdctl.topology import Node, RoleConfig, Topology
    from pdctl.topology.placement import NodeSlot

CPU_FLAGS = ["--device", "cpu", "--sampling-backend", "pytorch", "--grammar-backend", "none",
             "--skip-server-warmup", "--sleep-on-idle"]
ATTENTION_BACKEND = "torch_native"
MEM_FRACTION_STATIC = 0.05  # of the host's memory: SGLang sizes the KV pool from it
MAX_TOTAL_TOKENS = 4096
CPU_TIMEOUT_S = 60  # SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT / _WAITING_TIMEOUT on CPU nodes
MOONCAKE_TCP_ENV = {"MOONCAKE_PROTOCOL": "tcp", "MC_FORCE_TCP": "1", "MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER": "65535",
                    "MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER": "65535"}


def is_cpu(node: Node) -> bool:
    return node.gpu == "cpu"


def module(node: Node) -> str:
    """The module NODE's SGLang server runs as."""
    return SERVE_MODULE if is_cpu(node) else "sglang.launch_server"


def cpu_flags(topo: Topology, role: RoleConfig) -> list[str]:
    """The flags a CPU node adds (before `args:`, which may replace any of them)."""
    flags = list(CPU_FLAGS)
    if role.attention_backend is None:
        flags += ["--attention-backend", ATTENTION_BACKEND]
    if role.mem_fraction_static is None:
        flags += ["--mem-fraction-static", str(MEM_FRACTION_STATIC)]
    if role.max_total_tokens is None:
        flags += ["--max-total-tokens", str(MAX_TOTAL_TOKENS)]
    if role.name in ("prefill", "decode"):
        flags.append("--disable-overlap-schedule")
    if role.name == "decode":
        flags += ["--disaggregation-decode-retraction-backup", "cpu_tensor"]
    return flags


def cpu_env(topo: Topology, role: RoleConfig, slot: NodeSlot, node: Node) -> dict[str, str]:
    """The environment a CPU node's server gets (the caller puts the topology's env over it)."""
    env = {"SGLANG_USE_CPU_ENGINE": "1", "SGLANG_HOST_IP": node.address, "PYTHONPATH": PDCTL_ROOT}
    if slot.num_gpus > 1:
        env["SGLANG_CPU_OMP_THREADS_BIND"] = "|".join(str(slot.base_gpu_id + r) for r in range(slot.num_gpus))
    if role.name in ("prefill", "decode"):
        env["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] = str(CPU_TIMEOUT_S)
        env["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] = str(CPU_TIMEOUT_S)
        if topo.transfer.backend == "mooncake":
            env.update(MOONCAKE_TCP_ENV)
    return env


def numerics_notes(topo: Topology) -> list[str]:
    """[NUMERICS_NOTE] when a CPU node of TOPO serves a gpt-oss model with SGLang (adaptation
    gpt-oss-sinks-ignored: the numerics are not gpt-oss's), else []. A model that does not resolve here is
    check-compat's to name, not this note's."""
    if topo.engine.kind != "sglang":
        return []
    nodes = {n.name: n for n in topo.nodes}
    roles = [topo.role(name) for name in ("prefill", "decode", "colocated") if getattr(topo, name) is not None]
    if not any(is_cpu(nodes[name]) for role in roles for name in role.nodes if name in nodes):
        return []
    try:
        spec = resolve_model_spec(topo.model, engine_kind="sglang")
    except UserError:
        return []
    return [NUMERICS_NOTE] if spec.model_type == "gpt_oss" else []
