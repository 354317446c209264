"""SGLang's runtime as its KV managers need it, in a process without GPUs, scheduler or model weights.

Runs in SGLang's interpreter. What a manager reads (measured on 0.5.23, /work notes): its settings from
SGLang's process-wide runtime context (`publish(server_args, ranks=...)`, re-published per rank: a manager
reads its rank at construction), `pp_group` (set by torch.distributed, read unconditionally by the prefill
manager), a model folder holding a `config.json`, the host address from SGLANG_HOST_IP, and for Mooncake
the process's shared transfer engine. Several ranks (and several rehearsal cases) live in one process; a
rank's manager is built right after publishing that rank.

The one deviation from a GPU server, reported wherever it is used (`Bypasses`): NIXL on host memory. SGLang
registers its KV as the memory kind the pool says and its state (SWA) buffers as VRAM unconditionally, and it
refuses heterogeneous-TP writes into host memory (NotImplementedError). With `bypass_guards`, pdctl hands
SGLang its pools described as VRAM — so SGLang runs exactly the code path it runs on GPUs — and the NIXL
agent class SGLang instantiates registers and addresses that memory as DRAM. Without it, SGLang's own
host-memory path runs (and fails where SGLang says it does).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from pdctl.sglang_stack.spec import SideSpec

log = logging.getLogger("pdctl.sglang_stack")

NIXL_BYPASS = (
    "NIXL on host memory: pdctl described the host-memory pools to SGLang as VRAM (SGLang's GPU code path ran, "
    "so its refusal of heterogeneous-TP writes into host memory was not reached) and the NIXL agent registered "
    "and addressed that memory as DRAM"
)


def prepare_env(host: str, timeout: float) -> None:
    """Environment SGLang reads, set before it is imported: the advertised address, timeouts a failed
    rehearsal waits out (SGLang's default is 300 s each), Mooncake over TCP with room for big batches."""
    os.environ["SGLANG_HOST_IP"] = host
    for var in ("SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"):
        os.environ.setdefault(var, str(int(max(5, timeout))))
    os.environ.setdefault("MOONCAKE_PROTOCOL", "tcp")
    os.environ.setdefault("MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER", "65535")
    os.environ.setdefault("MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER", "65535")
    os.environ.setdefault("SGLANG_ROLE_NAMESPACES", "off")


def preload() -> None:
    """Import every SGLang module a case uses, so each forked case starts with them loaded (no threads are
    started by these imports: the driver forks after them)."""
    import sglang.srt.disaggregation.common.conn
    import sglang.srt.disaggregation.mooncake.conn
    import sglang.srt.disaggregation.nixl.conn
    import sglang.srt.disaggregation.utils
    import sglang.srt.distributed.device_communicators.mooncake_transfer_engine
    import sglang.srt.mem_cache.memory_pool
    import sglang.srt.mem_cache.swa_memory_pool
    import sglang.srt.runtime_context
    import sglang.srt.server_args  # noqa: F401


def sglang_version() -> str:
    import sglang

    return str(sglang.__version__)


@dataclass
class Failures:
    """Exceptions raised in SGLang's own threads (bootstrap thread, transfer workers), which SGLang logs and
    then lets die: a request would hang until its timeout. Recorded so a rehearsal names them at once."""

    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> None:
        previous = threading.excepthook

        def hook(args: Any) -> None:
            if args.exc_type is SystemExit:
                return
            text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
            with self.lock:
                self.events.append({"thread": args.thread.name if args.thread else "?",
                                    "error": f"{args.exc_type.__name__}: {args.exc_value}".strip(),
                                    "traceback": text, "at": time.monotonic()})
            previous(args)

        threading.excepthook = hook

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events[mark:])

    def mark(self) -> int:
        with self.lock:
            return len(self.events)


FAILURES = Failures()


def model_dir(spec: SideSpec) -> str:
    """A folder with only a config.json, for ServerArgs (no weights or tokenizer are read). A plain Llama
    config of the same attention shape: the managers never look at the model, and model-specific ServerArgs
    hooks (gpt-oss's attention backend choices) are not what a transfer rehearsal exercises. One folder per
    shape under the temp dir, shared by every process that needs it (written atomically)."""
    layers = len(spec.full_layers) + len(spec.swa_layers) + len(spec.linear_layers)
    heads = math.lcm(spec.kv_heads, spec.tp)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": heads * spec.head_dim,
              "intermediate_size": 4 * heads * spec.head_dim, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": spec.kv_heads, "head_dim": spec.head_dim,
              "vocab_size": 32000, "max_position_embeddings": max(8192, 2 * spec.tokens), "rms_norm_eps": 1e-5,
              "torch_dtype": "bfloat16"}
    text = json.dumps(config, sort_keys=True)
    path = os.path.join(tempfile.gettempdir(), "pdctl-sglang-models", hashlib.sha256(text.encode()).hexdigest()[:16])
    target = os.path.join(path, "config.json")
    if not os.path.exists(target):
        os.makedirs(path, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    return path


def server_args(spec: SideSpec, bootstrap_port: int) -> Any:
    """SGLang's ServerArgs for one side (the fields its managers read)."""
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(model_path=model_dir(spec), device=spec.device, tp_size=spec.tp, page_size=spec.page_size,
                      disaggregation_mode=spec.role, disaggregation_transfer_backend=spec.backend,
                      disaggregation_bootstrap_port=bootstrap_port, host=spec.host, port=30000,
                      skip_tokenizer_init=True, kv_cache_dtype=spec.kv_cache_dtype)


def gpu_for(spec: SideSpec, rank: int) -> int:
    """The GPU of RANK on a VRAM rehearsal (rank r on GPU r, wrapping over the GPUs there are); 0 on DRAM."""
    if spec.device == "cpu":
        return 0
    import torch

    return rank % max(1, torch.cuda.device_count())


def publish_rank(args: Any, rank: int, gpu: int = 0) -> None:
    """Make RANK the process's SGLang rank (its managers read rank and sizes at construction)."""
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish

    get_parallel().clear_stamp()  # the previous rank's (and case's) stamped ranks and sizes
    publish(args, role="scheduler", ranks=SpawnRanks(world_rank=rank, gpu_id=gpu))
    get_parallel().override_permanently(pp_group=None)


def new_mooncake_engine(gpu: int = 0) -> None:
    """A Mooncake engine of its own for the rank built next. SGLang shares one engine per process
    (`maybe_init_shared_mooncake_transfer_engine`), and a server runs one process per rank: ranks of one
    driver process must not share one, or the prefill sees every decode rank under one session id (and
    waits forever for the others)."""
    from sglang.srt.distributed.device_communicators import mooncake_transfer_engine as mte
    from sglang.srt.utils.network import get_local_ip_auto

    mte._mooncake_transfer_engine = mte.MooncakeTransferEngine(hostname=get_local_ip_auto(), gpu_id=gpu)


@dataclass
class Descriptors:
    """(address, length) descriptors SGLang posted to its transfer library, counted at the library call."""

    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n


DESCRIPTORS = Descriptors()


_HOST_MEMORY = {"on": False}
def install_nixl_agent(host_memory: bool) -> None:
    """Make the NIXL agent class SGLang instantiates count the descriptors of every transfer it creates and,
    with HOST_MEMORY, treat "VRAM" as host memory (DRAM): see the module docstring. The class is installed
    once per process; HOST_MEMORY applies to the agents created from now on (the next case's managers)."""
    import nixl._api as api

    _HOST_MEMORY["on"] = host_memory
    base = api.nixl_agent
    if getattr(base, "_pdctl", False):
        return

    class PdctlAgent(base):  # type: ignore[misc,valid-type]
        _pdctl = True

        def __init__(self, *a: Any, **k: Any) -> None:
            self._host_memory = _HOST_MEMORY["on"]
            super().__init__(*a, **k)

        def _kind(self, mem_type: Any) -> Any:
            return "DRAM" if mem_type == "VRAM" and self._host_memory else mem_type

        def register_memory(self, reg_list: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().register_memory(reg_list, self._kind(mem_type), *a, **k)

        def get_xfer_descs(self, descs: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().get_xfer_descs(descs, self._kind(mem_type), *a, **k)

        def get_reg_descs(self, descs: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().get_reg_descs(descs, self._kind(mem_type), *a, **k)

        def prep_xfer_dlist(self, agent_name: Any, xfer_list: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().prep_xfer_dlist(agent_name, xfer_list, self._kind(mem_type), *a, **k)

        def make_prepped_xfer(self, operation: Any, local_side: Any, local_indices: Any, *a: Any, **k: Any) -> Any:
            DESCRIPTORS.add(len(local_indices))
            return super().make_prepped_xfer(operation, local_side, local_indices, *a, **k)

        def initialize_xfer(self, operation: Any, local_descs: Any, *a: Any, **k: Any) -> Any:
            DESCRIPTORS.add(int(local_descs.descCount()))
            return super().initialize_xfer(operation, local_descs, *a, **k)

    api.nixl_agent = PdctlAgent


def install_mooncake_counter() -> None:
    """Count the descriptors SGLang hands Mooncake's engine (one per (address, length) in each batch)."""
    from sglang.srt.distributed.device_communicators import mooncake_transfer_engine as mte

    cls = mte.MooncakeTransferEngine
    if getattr(cls, "_pdctl", False):
        return
    batch = cls.batch_transfer_sync

    def counted(self: Any, session_id: str, buffers: Any, *a: Any, **k: Any) -> Any:
        DESCRIPTORS.add(len(buffers))
        return batch(self, session_id, buffers, *a, **k)

    cls.batch_transfer_sync = counted
    cls._pdctl = True


def mem_kinds(spec: SideSpec, count: int) -> list[str]:
    """The NIXL memory kind SGLang is told for each KV buffer: VRAM on GPUs, and on host memory VRAM too when
    guards are bypassed (the agent maps it to DRAM), else DRAM (SGLang's own host-memory path)."""
    if spec.device != "cpu" or spec.bypass_guards:
        return ["VRAM"] * count
    return ["DRAM"] * count


def free_bootstrap_server(backend: str, host: str, port: int, deadline_s: float = 30.0) -> tuple[Any, int]:
    """SGLang's bootstrap server on PORT (0: a free one; retried on another if that one was taken meanwhile).
    Returns (server, port) once it answers /health."""
    import requests
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class

    cls = get_kv_class(TransferBackend(backend), KVClassType.BOOTSTRAP_SERVER)
    for _ in range(5 if port == 0 else 1):
        chosen = port or _free_port(host)
        server = cls(host, chosen)
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline and server.thread.is_alive():
            try:
                if requests.get(f"http://{host}:{chosen}/health", timeout=2).status_code == 200:
                    return server, chosen
            except requests.RequestException:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"SGLang's bootstrap server did not start on {host}:{port or 'a free port'}")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def quiet_logging() -> None:
    """SGLang's and NIXL's logs go to stderr at WARNING (stdout carries the driver protocol)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)
    for name in ("sglang", "nixl", "NIXL"):
        logging.getLogger(name).setLevel(logging.WARNING)
