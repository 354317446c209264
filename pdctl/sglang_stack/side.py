"""One role's ranks on SGLang's stack, for a rehearsal: SGLang's pools, metadata buffers, KVArgs and KV
manager per rank (and, on the prefill side, SGLang's bootstrap server), then one request through them.

Runs in SGLang's interpreter (the driver process). Setup failures are the "model load" stage: that is where
a server builds its pools and managers and registers them with its transfer library.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pdctl.sglang_stack import flows, runtime
from pdctl.sglang_stack.flows import RankRequest, StackFailure
from pdctl.sglang_stack.kvargs import kv_args
from pdctl.sglang_stack.pools import RankPools
from pdctl.sglang_stack.spec import SideSpec

AUX_SLOTS = 8
AUX_TOKEN = 4242  # the "first token" prefill puts into the aux row; decode checks it arrived


class Side:
    """Every rank of one role for one rehearsal case."""

    def __init__(self, spec: SideSpec) -> None:
        self.spec = spec
        self.ranks: list[RankPools] = []
        self.meta: list[Any] = []
        self.managers: list[Any] = []
        self.bootstrap_server: Any = None
        self.bootstrap_port = spec.bootstrap_port

    def setup(self) -> dict[str, Any]:
        """Pools, pattern (prefill), bootstrap server (prefill), managers; StackFailure("model load")."""
        import torch
        from sglang.srt.disaggregation.utils import (
            DisaggregationMode,
            KVClassType,
            MetadataBuffers,
            TransferBackend,
            get_kv_class,
            get_kv_transfer_buf_infos,
        )

        spec = self.spec
        t0 = time.monotonic()
        try:
            if spec.backend == "nixl":
                runtime.install_nixl_agent(host_memory=spec.device == "cpu" and spec.bypass_guards)
            if spec.role == "prefill":
                self.bootstrap_server, self.bootstrap_port = runtime.free_bootstrap_server(
                    spec.backend, spec.bootstrap_host, spec.bootstrap_port)
            args = runtime.server_args(spec, self.bootstrap_port)
            if spec.backend == "mooncake":
                runtime.install_mooncake_counter()
            manager_cls = get_kv_class(TransferBackend(spec.backend), KVClassType.MANAGER)
            for rank in range(spec.tp):
                gpu = runtime.gpu_for(spec, rank)
                runtime.publish_rank(args, rank, gpu)
                if spec.backend == "mooncake":
                    runtime.new_mooncake_engine(gpu)
                pools = RankPools(spec, rank, gpu)
                meta = MetadataBuffers(size=AUX_SLOTS, hidden_size=16, hidden_states_dtype=torch.float32,
                                       max_sampling_mask_tokens=1)
                full = get_kv_transfer_buf_infos(pools.pool)
                kvargs = kv_args(spec, rank, full, meta.get_buf_infos(), pool=pools.pool, gpu=gpu,
                                 req_pool=pools.req_pool)
                mode = DisaggregationMode.PREFILL if spec.role == "prefill" else DisaggregationMode.DECODE
                self.managers.append(manager_cls(kvargs, mode, args, False))
                if spec.role == "prefill":
                    pools.fill(corrupt_state=spec.fault == "state-bytes")
                self.ranks.append(pools)
                self.meta.append(meta)
        except StackFailure:
            raise
        except Exception as exc:
            raise StackFailure("model load", f"{type(exc).__name__}: {exc}") from exc
        return {"bootstrap_port": self.bootstrap_port, "setup_s": time.monotonic() - t0,
                "bytes": sum(r.nbytes() for r in self.ranks)}

    def bypasses(self) -> list[str]:
        """The deviations from a GPU server this case ran with (see pdctl.sglang_stack.runtime)."""
        spec = self.spec
        return [runtime.NIXL_BYPASS] if spec.backend == "nixl" and spec.device == "cpu" and spec.bypass_guards else []

    def parts(self, room: int) -> list[RankRequest]:
        slot = room % AUX_SLOTS
        return [RankRequest(r.full_ids, r.swa_ids if r.swa_pool is not None else None, slot, self._mamba_slot(r))
                for r in self.ranks]

    def _mamba_slot(self, pools: RankPools) -> int | None:
        """The request's mamba slot as this side hands it to SGLang (the "state-slot" fault: the next slot,
        not the one the byte check reads)."""
        if pools.state is None:
            return None
        return pools.state.slot + (1 if self.spec.fault == "state-slot" else 0)

    def transfer(self, room: int, check: Callable[[], None] | None = None) -> dict[str, Any]:
        """Move one request (ROOM) through this side's senders or receivers; the decode side then checks
        every byte and the aux row. Returns the side's result document (never raises StackFailure)."""
        spec = self.spec
        addr = f"{spec.bootstrap_host}:{self.bootstrap_port}"
        slot = room % AUX_SLOTS
        before = runtime.DESCRIPTORS.count
        doc: dict[str, Any] = {"ok": True, "stage": None, "error": None}
        try:
            if spec.role == "prefill":
                for meta in self.meta:
                    meta.output_ids[slot, 0] = AUX_TOKEN
                    meta.bootstrap_room[slot, 0] = room
                doc |= flows.send(self.managers, spec.backend, addr, room, self.parts(room), spec.timeout, check)
            else:
                for pools, meta in zip(self.ranks, self.meta, strict=True):
                    pools.clear()
                    meta.output_ids[slot].zero_()
                    meta.bootstrap_room[slot].zero_()
                doc |= flows.receive(self.managers, spec.backend, addr, room, self.parts(room), spec.timeout, check)
        except StackFailure as exc:
            doc |= {"ok": False, "stage": exc.stage, "error": exc.message}
        doc["descriptors"] = runtime.DESCRIPTORS.count - before
        doc["bypasses"] = self.bypasses()
        if spec.role == "decode":
            doc["mismatched_bytes"] = sum(r.mismatched_bytes() for r in self.ranks)
            doc["state_mismatched_bytes"] = sum(r.state_mismatched_bytes() for r in self.ranks)
            doc["state_bytes"] = sum(r.state_nbytes() for r in self.ranks)
            doc["aux_ok"] = all(int(m.output_ids[slot, 0]) == AUX_TOKEN and int(m.bootstrap_room[slot, 0]) == room
                                for m in self.meta)
            doc["bytes"] = sum(r.nbytes() for r in self.ranks)
        return doc
