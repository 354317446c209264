"""The sections of a topology file exactly as written (TOPOLOGY.md): keys, types, defaults, enumerations.

`TopologyFile` mirrors the YAML (extra keys forbidden) so that validation errors point at what the user
wrote and the JSON schema documents the file format. The effective view every consumer reads (roles with
server: defaults merged) is `pdctl.topology.model.Topology`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pdctl.topology.base import EnvMap, Section, env_value
from pdctl.topology.bench import BenchConfig
from pdctl.topology.cluster import ContainerConfig, SlurmConfig
from pdctl.topology.kubernetes import KubernetesConfig
from pdctl.transfer.registry import DEFAULT, NAMES, PDCTL_STACK, STACK_NAMES

GpuKind = Literal["gb300", "gb200", "b200", "h200", "h100", "cpu"]
Backend = Literal[NAMES]  # the transfer backends of pdctl.transfer.registry
Protocol = Literal["rdma", "tcp"]
NvlinkMode = Literal["auto", "on", "off"]
TransferStack = Literal[STACK_NAMES]  # the transfer stacks of pdctl.transfer.registry
KvLayout = Literal["nhd", "hnd", "vectorized_5d"]
# SGLang 0.5.23 `--kv-cache-dtype` choices (srt/arg_groups/fields/model.py).
KvCacheDtype = Literal["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
# A deployment name becomes a directory (.pdctl/runs/<name>), a Slurm job name and part of log file names:
# 63 characters (a DNS label) keeps every one of those valid.
NAME_MAX = 63
NODE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# GPU kinds that are SM100+ (Blackwell); used by compat rules (mxfp8, trtllm_mha) and docs.
BLACKWELL_GPUS: frozenset[str] = frozenset({"gb300", "gb200", "b200"})


_SCALARS = (str, int, float, bool)


def _normalise_args(value: Any) -> Any:
    """Flag names -> SGLang's dash form without leading dashes, so server/role `args` merge by flag.

    Values must be what a command line can carry: a scalar, null, or a list of scalars (repeated values).
    """
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not key.strip("-"):
            raise ValueError(f"expected flag names (strings) as keys, got {key!r}")
        ok = val is None or isinstance(val, _SCALARS) or (
            isinstance(val, list) and all(isinstance(v, _SCALARS) for v in val)
        )
        if not ok:
            raise ValueError(f"flag {key!r}: expected a scalar, null or a list of scalars, got {val!r}")
        out[key.lstrip("-").replace("_", "-")] = val
    return out


ArgValue = Any


class EngineConfig(Section):
    """Which server program runs the roles, and how it is started on the nodes."""

    kind: Literal["sglang", "reference"] = Field(
        "sglang", description="sglang, or reference = pdctl's CPU reference engine (same flags, CPU only)."
    )
    version: str | None = Field(
        None, description='SGLang version, e.g. "0.5.23" (quote it); gates version-dependent compat rules.'
    )
    python: str = Field("python3", description="Interpreter used on the nodes to start servers and router.")
    env: EnvMap = Field(
        default_factory=dict,
        description="Extra environment for every process (prefill.env / decode.env / router.env add to it).",
    )
    container: ContainerConfig | None = Field(
        None, description="Run the engine in a container: docker on local/ssh nodes, pyxis/enroot on Slurm."
    )



class ModelConfig(Section):
    """Which model is served and how pdctl finds its architecture (see pdctl.models for resolution)."""

    path: str = Field(
        ..., min_length=1,
        description="HF repo id or local directory (relative paths resolve against the current directory).",
    )
    revision: str | None = Field(None, description="Optional commit / tag passed as --revision.")
    config: str | None = Field(None, description="Optional path to a config.json, read offline.")
    preset: str | None = Field(
        None, description="Optional built-in spec name (gpt-oss-20b, gpt-oss-120b, llama-3.1-8b, ...)."
    )

    def local_path(self) -> Path | None:
        """Absolute path of `path` if it names an existing local directory (launched processes get this)."""
        candidate = Path(self.path).expanduser()
        return candidate.resolve() if candidate.is_dir() else None

    def config_path(self) -> Path | None:
        """Absolute path of `config` (resolved against the current directory), or None."""
        return Path(self.config).expanduser().resolve() if self.config else None


def _ssh_value(value: Any) -> Any:
    """ssh -o values: YAML booleans back to ssh's yes/no, numbers to text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return env_value(value)


class SSHConfig(Section):
    """How to reach a remote node; the executor builds `ssh [-p port] [-i key] [-o K=V ...] user@host`."""

    user: str | None = Field(None, description="Remote user (default: ssh's default).")
    port: int = Field(22, ge=1, le=65535, description="sshd port.")
    key: str | None = Field(None, description="Identity file (-i).")
    options: dict[str, str] = Field(
        default_factory=dict,
        description='ssh -o options: a mapping {StrictHostKeyChecking: "no"} or a list ["K=V", ...].',
    )

    @field_validator("options", mode="before")
    @classmethod
    def _options_form(cls, value: Any) -> Any:
        if isinstance(value, list):
            out: dict[Any, Any] = {}
            for item in value:
                if not isinstance(item, str) or "=" not in item:
                    raise ValueError(f"expected 'Key=Value' strings in the options list, got {item!r}")
                key, _, val = item.partition("=")
                out[key.strip()] = val.strip()
            return out
        if isinstance(value, dict):  # YAML reads `StrictHostKeyChecking: no` as false: ssh wants yes/no
            return {k: _ssh_value(v) for k, v in value.items()}
        return value

    def option_args(self) -> list[str]:
        """The `-o K=V` arguments, in file order."""
        args: list[str] = []
        for key, val in self.options.items():
            args += ["-o", f"{key}={val}"]
        return args


class Node(Section):
    """One machine of the deployment."""

    name: str = Field(..., pattern=NODE_NAME_PATTERN, description="Unique node name, referenced by roles.")
    host: str | None = Field(
        None, min_length=1,
        description="Where pdctl reaches the node (ssh target, Slurm node name) and, unless advertise_host is set, "
        "the address peers use. Required, except with a slurm: section: a node without host is given one of "
        "the job's nodes at run time.",
    )
    gpu: GpuKind = Field(..., description="GPU kind: gb300 | gb200 | b200 | h200 | h100 | cpu.")
    gpus: int = Field(..., ge=1, description="GPUs on the node (cpu nodes: number of rank slots).")
    ssh: SSHConfig | None = Field(None, description="null = this machine; else how to reach it over ssh.")
    ib_devices: list[str] = Field(default_factory=list, description="InfiniBand devices, e.g. [mlx5_0].")
    advertise_host: str | None = Field(
        None, min_length=1,
        description="Address this node's servers bind and give to peers (router, bootstrap, KV transfer) when "
        "it differs from `host` (the address pdctl reaches the node at), e.g. on nodes with several interfaces.",
    )

    @property
    def allocated(self) -> bool:
        """True for a node without host: Slurm assigns it one of the job's nodes at run time."""
        return self.host is None

    @property
    def target(self) -> str:
        """Where pdctl reaches the node: its host, or `<name>` for a node the Slurm job assigns later (what a
        dry run prints in its place)."""
        return self.host if self.host is not None else f"<{self.name}>"

    @property
    def address(self) -> str:
        """The address the node's servers bind and advertise: advertise_host, else host (`<name>` while a
        Slurm-assigned node is not known yet)."""
        return self.advertise_host or self.target


class TransferConfig(Section):
    """KV transfer between prefill and decode."""

    backend: Backend = Field(DEFAULT, description=" | ".join(NAMES) + " (--disaggregation-transfer-backend).")
    protocol: Protocol = Field("rdma", description="rdma | tcp (mooncake tcp = SGLang's mooncake_tcp).")
    ib_device: str | None = Field(None, description="-> --disaggregation-ib-device.")
    staging_buffer: bool = Field(False, description="-> SGLANG_DISAGG_STAGING_BUFFER=1.")
    bootstrap_port: int = Field(
        8998, ge=1, le=65535,
        description="-> --disaggregation-bootstrap-port; prefill replica i uses bootstrap_port + i.",
    )
    nvlink: NvlinkMode = Field(
        "auto",
        description="Multi-node NVLink (GB200/GB300 NVL72) for the KV transfer: on renders Mooncake's MNNVL "
        "environment; auto does so when preflight finds prefill and decode nodes in one NVLink domain; off never.",
    )
    stack: TransferStack = Field(
        PDCTL_STACK.name,
        description="Whose transfer code the reference engine, bench-transfer and preflight run: pdctl (its own "
        "re-implementation) or sglang (SGLang's own KV managers, senders, receivers and bootstrap server).",
    )


class ServerConfig(Section):
    """Server settings shared by every role; each key may be overridden under prefill: / decode: / colocated:."""

    page_size: int = Field(64, ge=1, description="-> --page-size (must match between roles).")
    kv_cache_dtype: KvCacheDtype = Field("auto", description="-> --kv-cache-dtype.")
    kv_layout: KvLayout = Field("nhd", description="KV cache layout the platform resolves (NHD on CUDA).")
    hybrid_swa_memory: bool = Field(True, description="false -> --disable-hybrid-swa-memory.")
    unified_memory: bool = Field(False, description="true -> --enable-unified-memory.")
    attention_backend: str | None = Field(None, description="-> --attention-backend.")
    chunked_prefill_size: int | None = Field(None, description="-> --chunked-prefill-size.")
    context_length: int | None = Field(None, ge=1, description="-> --context-length.")
    max_total_tokens: int | None = Field(None, ge=1, description="-> --max-total-tokens.")
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description="-> --mem-fraction-static.")
    random_seed: int | None = Field(None, description="-> --random-seed.")
    args: dict[str, ArgValue] = Field(
        default_factory=dict,
        description="Any other SGLang flag, name -> value (true = bare flag, false/null = omitted). Names "
        "are "
        "normalised to dash form without leading dashes; role args are merged over server args.",
    )

    @field_validator("args", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        return _normalise_args(value)


SERVER_KEYS: tuple[str, ...] = tuple(ServerConfig.model_fields)


class PlacedSpec(ServerConfig):
    """Keys every server role has (PD roles and the colocated server): placement plus server: overrides.

    Which server keys the user actually wrote is `model_fields_set`; only those override server:.
    """

    nodes: list[str] = Field(
        ..., min_length=1, description="Nodes this role may use; replicas are packed on them in order."
    )
    replicas: int = Field(1, ge=1, description="Independent server instances of this role.")
    tp: int = Field(1, ge=1, description="Tensor parallel size (--tp-size).")
    pp: int = Field(1, ge=1, description="Pipeline parallel size (--pp-size).")
    dp: int = Field(1, ge=1, description="Data parallel size (--dp-size).")
    enable_dp_attention: bool = Field(False, description="-> --enable-dp-attention (attention TP = tp / dp).")
    port: int = Field(30000, ge=1, le=65535, description="HTTP port of replica 0 (replica i: port + i).")
    env: EnvMap = Field(
        default_factory=dict,
        description="Environment of this role's processes only, merged over engine.env (a variable here wins).",
    )



class RoleSpec(PlacedSpec):
    """A PD role (prefill: / decode:) as written: placement keys plus optional overrides of any server: key."""

    radix_cache: bool = Field(
        False, description="-> --disaggregation-decode-enable-radix-cache (decode only; ignored on prefill)."
    )


class ColocatedSpec(PlacedSpec):
    """The one role of a `mode: colocated` topology: plain (non-PD) SGLang servers, no disaggregation keys.

    This is what `pdctl parity --reference-topology` launches to compare a PD deployment against.
    """

    port: int = Field(30000, ge=1, le=65535, description="HTTP port of replica 0 (replica i: port + i).")


class PrefillSpec(RoleSpec):
    """The prefill role as written."""

    port: int = Field(30000, ge=1, le=65535, description="HTTP port of replica 0 (replica i: port + i).")


class DecodeSpec(RoleSpec):
    """The decode role as written."""

    port: int = Field(30100, ge=1, le=65535, description="HTTP port of replica 0 (replica i: port + i).")


class RouterConfig(Section):
    """The sglang_router instance in front of the servers (PD mode for mode: pd, regular for colocated)."""

    node: str | None = Field(
        None, description="Node it runs on (default: the first node of the first role: prefill / colocated)."
    )
    host: str = Field("0.0.0.0", description="Bind address.")
    port: int = Field(8000, ge=1, le=65535, description="Router HTTP port.")
    metrics_port: int | None = Field(
        None, ge=1, le=65535,
        description="Its Prometheus port (--prometheus-port). Default: port + 1 (port - 1 for 65535).",
    )
    policy: str | None = Field(None, description="Routing policy passed to sglang_router (--policy).")
    args: dict[str, ArgValue] = Field(default_factory=dict, description="Other sglang_router flags.")
    env: EnvMap = Field(
        default_factory=dict, description="Environment of the router only, merged over engine.env (wins)."
    )


    @field_validator("args", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        return _normalise_args(value)


class Gsm8kEval(Section):
    """Defaults for `pdctl eval gsm8k`."""

    num_questions: int = Field(200, ge=1, description="Questions from the GSM8K test split.")
    num_shots: int = Field(5, ge=0, description="Few-shot examples in each prompt.")
    max_new_tokens: int = Field(512, ge=1, description="Generation limit per question.")
    parallel: int = Field(128, ge=1, description="Requests in flight.")
    floor: float | None = Field(None, ge=0, le=1, description="Minimum accuracy; below it the eval fails.")


class ParityEval(Section):
    """Defaults for `pdctl parity`."""

    max_new_tokens: int = Field(32, ge=1, description="Greedy tokens compared per prompt.")
    tolerance: float = Field(0.05, ge=0, description="Max |logprob delta| accepted per token.")


class EvalConfig(Section):
    """Defaults for `pdctl eval` / `pdctl parity` when run against this topology."""

    gsm8k: Gsm8kEval = Field(default_factory=Gsm8kEval, description="`pdctl eval gsm8k` defaults.")
    parity: ParityEval = Field(default_factory=ParityEval, description="`pdctl parity` defaults.")


Mode = Literal["pd", "colocated"]
# The sections each mode requires; the other mode's sections are errors (checked in loader.py, with positions).
MODE_SECTIONS: dict[str, tuple[str, ...]] = {"pd": ("prefill", "decode"), "colocated": ("colocated",)}


class SweepSpec(Section):
    """`sweep:` as the schema shows it; pdctl.topology.sweep reads it (with located messages) and builds the
    variants, each validated as a topology of its own."""

    params: dict[str, list[Any]] = Field(
        ..., description="Dotted keys as --set spells them (prefill.tp, server.mem_fraction_static) -> values."
    )
    zip: bool = Field(False, description="true: pair the lists in order; false: every combination.")


class TopologyFile(Section):
    """One YAML topology file, exactly as written (the public format; `pdctl schema` prints its schema).

    The role sections are optional here because which ones are required depends on `mode`; the loader checks
    that against the YAML (so the error can name the line) and `schema.py` states it as if/then/else.
    """

    name: str = Field(..., pattern=NAME_PATTERN, max_length=NAME_MAX,
                      description=f"Deployment name: [a-z0-9][a-z0-9-]*, at most {NAME_MAX} characters.")
    mode: Mode = Field(
        "pd", description="pd = prefill/decode disaggregated (prefill: + decode:); colocated = plain "
        "non-PD servers (colocated:), e.g. the reference server `pdctl parity` compares against.",
    )
    engine: EngineConfig = Field(default_factory=EngineConfig, description="Server program and environment.")
    model: ModelConfig = Field(..., description="The served model and how its architecture is found.")
    nodes: list[Node] = Field(..., min_length=1, description="Every machine the deployment uses.")
    transfer: TransferConfig = Field(
        default_factory=TransferConfig, description="KV transfer settings (ignored with mode: colocated)."
    )
    server: ServerConfig = Field(default_factory=ServerConfig, description="Defaults for every role.")
    prefill: PrefillSpec | None = Field(
        None, description="mode pd (required): the prefill role, placement and server overrides."
    )
    decode: DecodeSpec | None = Field(
        None, description="mode pd (required): the decode role, placement and server overrides."
    )
    colocated: ColocatedSpec | None = Field(
        None, description="mode colocated (required): the non-PD servers, placement and server overrides."
    )
    router: RouterConfig = Field(
        default_factory=RouterConfig,
        description="sglang_router: PD mode over prefill/decode, regular mode over colocated replicas.",
    )
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Defaults for eval and parity.")
    bench: BenchConfig = Field(default_factory=BenchConfig, description="Defaults for `pdctl bench serve`.")
    slurm: SlurmConfig | None = Field(
        None, description="Launch through Slurm (sbatch, or srun steps with --in-allocation): what the job asks for."
    )
    kubernetes: KubernetesConfig | None = Field(
        None, description="Launch on Kubernetes (LeaderWorkerSet or RoleBasedGroup workloads): the pods' image, "
        "scheduling, resources and volumes.")
    sweep: SweepSpec | None = Field(
        None,
        description="Variants of this topology: {params: {dotted.key: [values, ...]}, zip: false}; every "
        "combination (zip: true pairs the lists). check-compat judges each; launch runs each (pdctl.topology.sweep).",
    )
