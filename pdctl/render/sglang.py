"""SGLang worker commands: one `python -m sglang.launch_server` per replica per node.

PD roles get `--disaggregation-*` flags; a colocated replica (topology `mode: colocated`) is a plain server.
Settings SGLang takes from the environment are rendered there: the KV layout (SGLANG_USE_HND_KVCACHE, or
SGLANG_AITER_KV_CACHE_LAYOUT on ROCm) and the staging buffer; the transfer path's own environment (UCX's
transports for NIXL over TCP, path reporting, multi-node NVLink) is added by pdctl.render.transfer.

Every flag name here is SGLang's own, per release: the spelling of attention DP follows the flag table of
the topology's SGLang version (pdctl/sglang/flags), and check-compat parses every rendered command with that
table, so a renamed flag fails check-compat instead of a cluster launch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.render.cpu import cpu_env, cpu_flags, is_cpu, module
from pdctl.render.spec import ProcessSpec, merge_flags, node_ssh, optional_flag, process_name
from pdctl.sglang.facts import health_answers_within
from pdctl.sglang.settings import ENV_AITER_LAYOUT, ENV_HND, ENV_STAGING
from pdctl.sglang.table import FlagTable, load_table
from pdctl.sglang.versions import choose
from pdctl.transfer.registry import backend

if TYPE_CHECKING:
    from pdctl.topology import Node, RoleConfig, Topology
    from pdctl.topology.placement import NodeSlot, ReplicaPlacement

# kv_layout -> the environment variable SGLang reads it from (NHD is the default: nothing to set).
LAYOUT_ENV = {"hnd": (ENV_HND, "1"), "vectorized_5d": (ENV_AITER_LAYOUT, "vectorized_5d")}

# SGLang dests pdctl renders from a topology key: an `args:` entry for one of these duplicates the key
# (check-compat's args-override rule says which key to set instead).
RENDERED_FROM: dict[str, str] = {
    "model_path": "model.path", "revision": "model.revision",
    "disaggregation_mode": "the role section (prefill: / decode:)",
    "disaggregation_transfer_backend": "transfer.backend / transfer.protocol",
    "disaggregation_bootstrap_port": "transfer.bootstrap_port",
    "disaggregation_ib_device": "transfer.ib_device / nodes[].ib_devices",
    "tp_size": "tp", "pp_size": "pp", "dp_size": "dp", "attn_dp_size": "dp with enable_dp_attention",
    "enable_dp_attention": "enable_dp_attention", "page_size": "page_size", "kv_cache_dtype": "kv_cache_dtype",
    "disable_hybrid_swa_memory": "hybrid_swa_memory", "enable_unified_memory": "unified_memory",
    "disaggregation_decode_enable_radix_cache": "radix_cache", "attention_backend": "attention_backend",
    "chunked_prefill_size": "chunked_prefill_size", "context_length": "context_length",
    "max_total_tokens": "max_total_tokens", "mem_fraction_static": "mem_fraction_static",
    "random_seed": "random_seed", "host": "nodes[].host", "port": "port",
    "nnodes": "placement (nodes, gpus)", "node_rank": "placement (nodes, gpus)",
    "dist_init_addr": "placement (nodes, gpus)", "base_gpu_id": "placement (nodes, gpus)",
}


def flag_table(topo: Topology) -> FlagTable:
    """The flag table of the topology's SGLang version (the default version when it is not set)."""
    return load_table(choose(topo.engine.version).table)


def transfer_backend_name(topo: Topology) -> str:
    """SGLang's backend name (pdctl.transfer.registry): mooncake over TCP is its own name, `mooncake_tcp` (SGLang
    then sets MC_FORCE_TCP=1 itself and ignores the IB device); nixl picks its transport through UCX."""
    return backend(topo.transfer.backend).sglang_name(topo.transfer.protocol)


def ib_device(topo: Topology, node: Node) -> str | None:
    """--disaggregation-ib-device: transfer.ib_device, else the node's ib_devices (comma-separated);
    none for TCP, where SGLang would ignore it."""
    if topo.transfer.protocol == "tcp":
        return None
    if topo.transfer.ib_device:
        return topo.transfer.ib_device
    return ",".join(node.ib_devices) if node.ib_devices else None


def model_path(topo: Topology) -> str:
    """Absolute path for a local model directory (processes may run in another directory or on another
    node), else the HF repo id as written. A path spelled like a path (./x, ../x, /x, ~/x, .pdctl/x) is made
    absolute even if it does not exist yet, e.g. a checkpoint created after a dry run."""
    local = topo.model.local_path()
    if local is not None:
        return str(local)
    path = topo.model.path
    if path.startswith((".", "/", "~")):
        return str(Path(path).expanduser().resolve())
    return path


def worker_env(topo: Topology, slot: NodeSlot, role: RoleConfig) -> tuple[dict[str, str], bool]:
    """(environment, uses_base_gpu_id): engine.env with the role's env over it (Topology.env_of). If the user
    pinned CUDA_VISIBLE_DEVICES there, the slot's GPUs are selected from that list (and --base-gpu-id is not
    used, as indices are then relative); otherwise SGLang's --base-gpu-id selects them. The user's variables
    win over rendered ones."""
    env = topo.env_of(role.name)
    if topo.transfer.staging_buffer and topo.is_pd:  # colocated: transfer: is ignored (no KV transfer)
        env[ENV_STAGING] = "1"
    if role.kv_layout in LAYOUT_ENV:
        name, value = LAYOUT_ENV[role.kv_layout]
        env.setdefault(name, value)
    pinned = env.get("CUDA_VISIBLE_DEVICES")
    if pinned:
        devices = [d.strip() for d in pinned.split(",") if d.strip()]
        chosen = devices[slot.base_gpu_id : slot.base_gpu_id + slot.num_gpus]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
        return env, False
    return env, True


def advertise_env(node: Node) -> dict[str, str]:
    """SGLANG_HOST_IP: the address SGLang's disaggregation code (bootstrap registration, Mooncake session,
    ZMQ endpoints) gives peers. Without it SGLang guesses (the source address of a route to 8.8.8.8), which
    on a node with several interfaces can differ from the address the router and peers use. Set when the
    advertised address is known: an explicit advertise_host, or a host written as an IP address."""
    import ipaddress

    try:
        ipaddress.ip_address(node.address)
    except ValueError:
        return {"SGLANG_HOST_IP": node.address} if node.advertise_host else {}
    return {"SGLANG_HOST_IP": node.address}


def _parallel_flags(topo: Topology, role: RoleConfig) -> list[str]:
    flags = ["--tp-size", str(role.tp), "--pp-size", str(role.pp)]
    if not role.enable_dp_attention:
        return flags + ["--dp-size", str(role.dp)]
    if "--attn-dp-size" not in flag_table(topo):  # releases before 0.5.22
        return flags + ["--dp-size", str(role.dp), "--enable-dp-attention"]
    # 0.5.22+: `--dp-size N --enable-dp-attention` is deprecated; it resolves to attn_dp_size = N, dp_size = 1.
    return flags + ["--dp-size", "1", "--attn-dp-size", str(role.dp)]


def render_sglang_replica(topo: Topology, role: RoleConfig, placement: ReplicaPlacement,
                          pythons: dict[str, str] | None = None) -> list[ProcessSpec]:
    """The processes of one replica: one per node slot (node rank), all with the same flags except
    --node-rank / --base-gpu-id; only node rank 0 serves HTTP. PYTHONS: each node's interpreter (default
    engine.python). A CPU node (`gpu: cpu`) runs SGLang through pdctl's CPU adaptations (pdctl.render.cpu)."""
    procs: list[ProcessSpec] = []
    for slot in placement.slots:
        node = topo.node(slot.node)
        env, use_base = worker_env(topo, slot, role)
        if role.name != "colocated":
            env = {**advertise_env(node), **env}  # a value the user set in engine.env wins
        if is_cpu(node):
            env = {**cpu_env(topo, role, slot, node), **env}
        python = (pythons or {}).get(node.name, topo.engine.python)
        argv = [python, "-m", module(node), "--model-path", model_path(topo)]
        argv += optional_flag("--revision", topo.model.revision)
        if role.name != "colocated":  # a colocated server is plain SGLang: no disaggregation flag at all
            argv += [
                "--disaggregation-mode",
                role.name,
                "--disaggregation-transfer-backend",
                transfer_backend_name(topo),
                "--disaggregation-bootstrap-port",
                str(placement.bootstrap_port),
            ]
            argv += optional_flag("--disaggregation-ib-device", ib_device(topo, node))
        argv += _parallel_flags(topo, role)
        argv += ["--page-size", str(role.page_size), "--kv-cache-dtype", role.kv_cache_dtype]
        if not role.hybrid_swa_memory:
            argv.append("--disable-hybrid-swa-memory")
        if role.unified_memory:
            argv.append("--enable-unified-memory")
        if role.name == "decode" and role.radix_cache:
            argv.append("--disaggregation-decode-enable-radix-cache")
        argv += optional_flag("--attention-backend", role.attention_backend)
        argv += optional_flag("--chunked-prefill-size", role.chunked_prefill_size)
        argv += optional_flag("--context-length", role.context_length)
        argv += optional_flag("--max-total-tokens", role.max_total_tokens)
        argv += optional_flag("--mem-fraction-static", role.mem_fraction_static)
        argv += optional_flag("--random-seed", role.random_seed)
        if is_cpu(node):
            argv += cpu_flags(topo, role)
        # Prometheus /metrics for `pdctl status` (SGLang serves it only when asked); `enable-metrics: false`
        # in args leaves it out.
        argv.append("--enable-metrics")
        argv += ["--host", node.address, "--port", str(placement.http_port)]
        if placement.nnodes > 1:
            argv += [
                "--nnodes",
                str(placement.nnodes),
                "--node-rank",
                str(slot.node_rank),
                "--dist-init-addr",
                str(placement.dist_init_addr),
            ]
        if use_base and slot.base_gpu_id and not is_cpu(node):  # CPU rank slots are cores, not devices
            argv += ["--base-gpu-id", str(slot.base_gpu_id)]
        argv = merge_flags(argv, role.args)
        head = slot.node_rank == 0
        ports = [placement.http_port] if head else []
        if head and role.name == "prefill":
            ports.append(placement.bootstrap_port)
        if head and placement.dist_init_addr:
            ports.append(int(placement.dist_init_addr.rsplit(":", 1)[1]))
        procs.append(
            ProcessSpec(
                name=process_name(role.name, placement.replica, slot.node_rank),
                role=role.name,
                replica=placement.replica,
                node=node.name,
                host=node.target,
                node_rank=slot.node_rank,
                argv=argv,
                env=env,
                url=placement.url if head else None,
                health_path="/health" if head else None,
                health_timeout_s=health_answers_within(env) if head else None,
                bind_host=node.address,
                ports=ports,
                ssh=node_ssh(node),
                advertise=node.address,
            )
        )
    return procs
