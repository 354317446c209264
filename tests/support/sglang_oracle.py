"""The SGLang side of the differential suite: a long-lived worker run by the side venv's interpreter.

    PDCTL_SGLANG_PYTHON tests/support/sglang_oracle.py     (tests/sglang/test_differential.py starts it)

It reads one JSON request per line on stdin, {"op": NAME, "cases": [...]}, calls SGLang 0.5.23's OWN code for
every case, and writes one JSON line {"results": [...]} (or {"error": traceback}). SGLang's methods are called
on `object.__new__(Cls)` with the attributes they read; the transfer library handles they call (Mooncake's
`engine`, NIXL's `agent`) are recorders that keep the (address, address, length) triples SGLang hands them
instead of moving bytes; the decode handshake fetches the prefill's info over real HTTP from a server in this
process. Nothing under test is replaced. This file must run without pdctl (it is not on the side venv's path).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.server
import json
import threading
from typing import Any

import numpy as np
from sglang.srt.disaggregation.base.conn import KVArgs, StateType
from sglang.srt.disaggregation.common import conn as common_conn
from sglang.srt.disaggregation.common.staging_buffer import compute_head_slice_params, compute_staging_layout
from sglang.srt.disaggregation.common.utils import group_concurrent_contiguous
from sglang.srt.disaggregation.mooncake.conn import MooncakeKVManager
from sglang.srt.disaggregation.nixl.conn import KVArgsRegisterInfo, NixlKVManager
from sglang_parser_oracle import op_parse, serve  # the parser worker beside this file (any release)

EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=1)


def digest(triples: list[tuple[int, int, int]]) -> dict[str, Any]:
    """What the suite compares: how many descriptors, their bytes, and a hash of the sorted triples."""
    ordered = sorted((int(s), int(d), int(n)) for s, d, n in triples)
    h = hashlib.sha256(np.asarray(ordered, dtype=np.uint64).tobytes() if ordered else b"").hexdigest()
    return {"count": len(ordered), "bytes": sum(t[2] for t in ordered), "sha256": h}


def failure(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}"}


# -- SGLang objects built the sanctioned way: object.__new__ + the attributes their methods read ----------
def kv_args(**attrs: Any) -> KVArgs:
    args = object.__new__(KVArgs)
    defaults = {"prefill_start_layer": 0, "kv_layer_ids": [], "state_types": [], "gpu_id": 0,
                "swa_kv_cache_layout": "nhd", "kv_head_num": 0, "total_kv_head_num": 0, "num_draft_entries": 0,
                "mla_compression_ratios": None}
    for key, value in {**defaults, **attrs}.items():
        setattr(args, key, value)
    return args


def manager(cls: type, **attrs: Any) -> Any:
    obj = object.__new__(cls)
    defaults = {"pp_size": 1, "pp_rank": 0, "is_mla_backend": False, "is_hybrid_mla_backend": False,
                "attn_cp_size": 1, "attn_cp_rank": 0, "enable_all_cp_ranks_for_transfer": False, "dcp_size": 1,
                "kv_layout": None, "dsv41_spec_layout": None, "prefill_info_table": {}}
    for key, value in {**defaults, **attrs}.items():
        setattr(obj, key, value)
    return obj


class MooncakeRecorder:
    """Stands where Mooncake's TransferEngine is: keeps every batch SGLang submits, reports success."""

    def __init__(self) -> None:
        self.triples: list[tuple[int, int, int]] = []
        self.batches = 0
        self.lock = threading.Lock()

    def batch_transfer_sync(self, session: str, src: list[int], dst: list[int], lengths: list[int]) -> int:
        with self.lock:
            self.triples += list(zip(src, dst, lengths))
            self.batches += 1
        return 0


class NixlRecorder:
    """Stands where the nixl_agent is: prepared dlists are kept as arrays, a transfer as index arrays."""

    def __init__(self) -> None:
        self.dlists: dict[int, np.ndarray] = {}
        self.xfers: list[tuple[int, np.ndarray, int, np.ndarray]] = []

    def prep_xfer_dlist(self, peer: str, descs: np.ndarray, mem_kind: str) -> int:
        arr = np.asarray(descs, dtype=np.uint64)
        if arr.ndim == 2 and arr.shape[1] == 5:  # strided runs (addr, len, dev, stride, count)
            arr = NixlKVManager._expand_stride_descs(arr)
        handle = len(self.dlists) + 1
        self.dlists[handle] = arr
        return handle

    def get_xfer_descs(self, descs: Any, mem_kind: str) -> Any:
        return descs

    def make_prepped_xfer(self, op: str, src: int, src_idx: Any, dst: int, dst_idx: Any) -> int:
        self.xfers.append((src, np.asarray(src_idx), dst, np.asarray(dst_idx)))
        return len(self.xfers)

    def transfer(self, handle: int) -> str:
        return "PROC"

    def triples(self) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        for src, src_idx, dst, dst_idx in self.xfers:
            s, d = self.dlists[src][src_idx], self.dlists[dst][dst_idx]
            if len(s) != len(d) or not np.array_equal(s[:, 1], d[:, 1]):
                raise ValueError("NIXL src/dst descriptor lists differ in count or lengths")
            out += list(zip(s[:, 0].tolist(), d[:, 0].tolist(), s[:, 1].tolist()))
        return out


# -- ops ----------------------------------------------------------------------------------------------------
def op_head_slice(case: list[int]) -> list[int]:
    src_tp, dst_tp, src_rank, dst_rank, heads = case
    s0, n, d0, _ = compute_head_slice_params(src_tp, dst_tp, src_rank, dst_rank, heads)
    return [s0, n, d0]


def _decode_manager(case: dict[str, Any]) -> Any:
    d = case["decode"]
    states = [StateType.BLOCK_SCALE] if d.get("kv_cache_dtype") == "mxfp8" else []
    return manager(common_conn.CommonKVManager, attn_tp_size=d["attn_tp"], pp_size=d["pp"],
                   is_mla_backend=bool(case.get("mla")), kv_cache_dtype_str=d["kv_cache_dtype"],
                   kv_args=kv_args(engine_rank=d["rank"], page_size=d["page_size"], state_types=states),
                   prefill_info_table={})


def op_rank_map(case: dict[str, Any]) -> dict[str, Any]:
    mgr = _decode_manager(case)
    p = case["prefill"]
    info = common_conn.PrefillServerInfo(attn_tp_size=p["attn_tp"], attn_cp_size=1, dp_size=1, pp_size=p["pp"],
                                         page_size=p["page_size"], kv_cache_dtype=p["kv_cache_dtype"],
                                         follow_bootstrap_room=True)
    try:
        mgr._resolve_rank_mapping(info)
    except AssertionError as exc:
        return failure(exc)
    return {"target_tp_ranks": info.target_tp_ranks, "required_dst_info_num": info.required_dst_info_num,
            "required_prefill_response_num": info.required_prefill_response_num,
            "target_pp_ranks": info.target_pp_ranks}


class _Route(http.server.BaseHTTPRequestHandler):
    """The prefill bootstrap server's GET /route answer for the case being checked."""

    current: dict[str, Any] = {}  # noqa: RUF012 - set per case by op_handshake (one case at a time)

    def do_GET(self) -> None:
        body = json.dumps(self.current).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


_SERVER: http.server.ThreadingHTTPServer | None = None


def _bootstrap_addr() -> str:
    global _SERVER
    if _SERVER is None:
        _SERVER = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Route)
        threading.Thread(target=_SERVER.serve_forever, daemon=True).start()
    return f"127.0.0.1:{_SERVER.server_address[1]}"


def op_handshake(case: dict[str, Any]) -> dict[str, Any]:
    """The decode side's first contact: try_ensure_parallel_info fetches /route over HTTP, checks, maps."""
    p = case["prefill"]
    _Route.current = {"attn_tp_size": p["attn_tp"], "attn_cp_size": 1, "dp_size": 1, "pp_size": p["pp"],
                      "page_size": p["page_size"], "kv_cache_dtype": p["kv_cache_dtype"],
                      "follow_bootstrap_room": True}
    mgr = _decode_manager(case)
    addr = _bootstrap_addr()
    try:
        ok = mgr.try_ensure_parallel_info(addr)
    except (RuntimeError, AssertionError) as exc:
        return failure(exc)
    if not ok:
        return {"error": "no prefill info"}
    info = mgr.prefill_info_table[addr]
    return {"target_tp_ranks": info.target_tp_ranks, "required_prefill_response_num":
            info.required_prefill_response_num, "target_pp_ranks": info.target_pp_ranks}


def _layout(case: dict[str, Any], side: str) -> tuple[list[int], list[int], int]:
    """One rank's SGLang-shaped K-then-V pointers and item lengths, as the suite built them."""
    ptrs, lens = case[f"{side}_ptrs"], case[f"{side}_lens"]
    return list(ptrs), list(lens), int(lens[0])


def op_blocks(case: dict[str, Any]) -> dict[str, Any]:
    """common/conn.py::_get_mha_head_slice_blocks on the prefill rank's manager."""
    src_ptrs, src_lens, _ = _layout(case, "src")
    dst_ptrs, dst_lens, _ = _layout(case, "dst")
    mgr = manager(common_conn.CommonKVManager, attn_tp_size=case["p_tp"], pp_size=case.get("pp", 1),
                  kv_args=kv_args(engine_rank=case["p_rank"], page_size=case["page_size"],
                                  total_kv_head_num=case["heads"], swa_kv_cache_layout=case.get("layout", "nhd")))
    try:
        blocks = mgr._get_mha_head_slice_blocks(src_ptrs, src_lens, dst_ptrs, dst_lens,
                                                np.asarray(case["src_pages"]), np.asarray(case["dst_pages"]),
                                                case["d_tp"], case["d_rank"])
    except RuntimeError as exc:
        return failure(exc)
    return digest([t for s, d, n in blocks for t in zip(s.tolist(), d.tolist(), [n] * len(s))])


def op_mooncake_slice(case: dict[str, Any]) -> dict[str, Any]:
    """mooncake/conn.py::send_kvcache_slice (full-attention KV, unequal TP), with a recording engine."""
    src_ptrs, src_lens, _ = _layout(case, "src")
    dst_ptrs, _, dst_item = _layout(case, "dst")
    rec = MooncakeRecorder()
    mgr = manager(MooncakeKVManager, attn_tp_size=case["p_tp"], engine=rec,
                  kv_args=kv_args(engine_rank=case["p_rank"], page_size=case["page_size"], kv_item_lens=src_lens,
                                  kv_data_ptrs=src_ptrs, total_kv_head_num=case["heads"]))
    ret = mgr.send_kvcache_slice("peer", np.asarray(case["src_pages"], dtype=np.int32), dst_ptrs,
                                 np.asarray(case["dst_pages"], dtype=np.int32), case["d_rank"], case["d_tp"],
                                 dst_item, EXECUTOR)
    return {"ret": ret, **digest(rec.triples)}


def op_nixl_slice(case: dict[str, Any]) -> dict[str, Any]:
    """nixl/conn.py: _init_hetero_tp_prep_handle at registration, then send_kvcache_slice, recording agent."""
    src_ptrs, src_lens, _ = _layout(case, "src")
    dst_ptrs, _, dst_item = _layout(case, "dst")
    rec = NixlRecorder()
    mgr = manager(NixlKVManager, attn_tp_size=case["p_tp"], agent=rec, prep_handle_slice_src=None,
                  prep_handles_slice_dst={}, _use_strided_descs=True,
                  kv_args=kv_args(engine_rank=case["p_rank"], page_size=case["page_size"], kv_item_lens=src_lens,
                                  kv_data_ptrs=src_ptrs, kv_data_lens=[n * case["slots"] for n in src_lens],
                                  total_kv_head_num=case["heads"], kv_head_num=max(1, case["heads"] // case["p_tp"])))
    peer = object.__new__(KVArgsRegisterInfo)
    for key, value in {"decode_tp_size": case["d_tp"], "decode_tp_rank": case["d_rank"], "dst_kv_item_len": dst_item,
                       "dst_kv_ptrs": dst_ptrs, "dst_num_slots": case["slots"], "gpu_id": 0}.items():
        setattr(peer, key, value)
    try:
        mgr._init_hetero_tp_prep_handle("peer", peer)
    except AssertionError as exc:
        return {"stage": "registration", **failure(exc)}
    mgr.send_kvcache_slice("peer", np.asarray(case["src_pages"], dtype=np.int32),
                           np.asarray(case["dst_pages"], dtype=np.int32))
    return digest(rec.triples())


def op_mooncake_pages(case: dict[str, Any]) -> dict[str, Any]:
    """mooncake/conn.py::send_kvcache (equal TP: whole pages, contiguous runs merged), recording engine."""
    src_ptrs, src_lens, _ = _layout(case, "src")
    dst_ptrs, _, _ = _layout(case, "dst")
    rec = MooncakeRecorder()
    mgr = manager(MooncakeKVManager, attn_tp_size=case["p_tp"], engine=rec, state_strides_validated=set(),
                  enable_custom_mem_pool=False, custom_mem_pool_type=None, max_transfer_batch_indices=0,
                  kv_args=kv_args(engine_rank=case["p_rank"], page_size=case["page_size"], kv_item_lens=src_lens,
                                  kv_data_ptrs=src_ptrs, mla_compression_ratios=None, num_draft_entries=0))
    from sglang.srt import runtime_context  # noqa: F401 - get_memory() reads the published server args

    ret = mgr._send_kvcache_generic("peer", src_ptrs, dst_ptrs, src_lens,
                                    np.asarray(case["src_pages"], dtype=np.int32),
                                    np.asarray(case["dst_pages"], dtype=np.int32), EXECUTOR)
    groups, _ = group_concurrent_contiguous(np.asarray(case["src_pages"], dtype=np.int32),
                                            np.asarray(case["dst_pages"], dtype=np.int32))
    return {"ret": ret, "runs": len(groups), **digest(rec.triples)}


def op_staging_layout(case: list[int]) -> dict[str, Any]:
    p_tp, d_tp, d_rank, heads, tokens, head_bytes, layers = case
    writers, writer_bytes, total = compute_staging_layout(p_tp, d_tp, d_rank, heads, tokens, head_bytes, layers)
    return {"writers": writers, "writer_bytes": list(writer_bytes), "total": total}


def op_pd_buffers(case: dict[str, Any]) -> dict[str, Any]:
    """SGLang's PD transfer buffers of a small CPU KV pool in LAYOUT (hnd: SGLANG_USE_HND_KVCACHE, as pdctl
    renders it): what a prefill/decode server builds at startup (get_kv_transfer_buf_infos), or its error."""
    import os

    import torch
    from sglang.srt.disaggregation.utils import get_kv_transfer_buf_infos
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    old = os.environ.pop("SGLANG_USE_HND_KVCACHE", None)
    if case["layout"] == "hnd":
        os.environ["SGLANG_USE_HND_KVCACHE"] = "1"
    try:
        pool = MHATokenToKVPool(size=64, page_size=16, dtype=torch.bfloat16, head_num=1, head_dim=8, layer_num=1,
                                device="cpu", enable_memory_saver=False)
        get_kv_transfer_buf_infos(pool)
    except AssertionError as exc:
        return failure(exc)
    finally:
        os.environ.pop("SGLANG_USE_HND_KVCACHE", None)
        if old is not None:
            os.environ["SGLANG_USE_HND_KVCACHE"] = old
    return {}


def op_kv_pool(case: dict[str, Any]) -> dict[str, Any]:
    """model_executor/pool_configurator.py on object.__new__ + the attributes it reads. Bytes per token are the
    formula of HybridSWAPoolConfigurator.__init__ / DefaultPoolConfigurator._compute_cell_size with SGLang's
    own ModelConfig.get_num_kv_heads (the constructors need a published runtime context, not available here)."""
    import types

    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor.pool_configurator import DefaultPoolConfigurator, HybridSWAPoolConfigurator

    hf = types.SimpleNamespace(model_type="llama", num_key_value_heads=case["kv_heads"],
                               num_attention_heads=case["kv_heads"])
    mc = object.__new__(ModelConfig)
    mc.hf_config, mc.hf_text_config, mc.is_draft_model = hf, hf, False
    heads = mc.get_num_kv_heads(case["tp"])
    per_token = heads * (case["head_dim"] + case["head_dim"]) * case["element_bytes"]
    if case["swa_layers"]:
        conf = object.__new__(HybridSWAPoolConfigurator)
        for key, value in {"_full_layers_num": case["full_layers"], "_swa_layers_num": case["swa_layers"],
                           "_draft_full_layers_num": 0, "_draft_swa_layers_num": 0, "_draft_swa_full_layers_num": 0,
                           "_draft_cell_size": 0, "_fused_full_entry": None, "_fused_swa_entry": None,
                           "_full_per_token": per_token, "_swa_per_token": per_token,
                           "_swa_full_tokens_ratio": case["ratio"], "_sliding_window_size": case["window"],
                           "_page_size": case["page"], "_enable_unified_memory": False}.items():
            setattr(conf, key, value)
        conf._recompute_cell_size()
    else:
        conf = object.__new__(DefaultPoolConfigurator)
        conf._fixed_overhead_bytes, conf._zero_kv_max_tokens = 0, 0
        conf._cell_size = per_token * case["full_layers"]
    try:
        sizes = conf.calculate_pool_sizes(case["budget"], case["page"])
    except Exception as exc:  # noqa: BLE001 - SGLang's refusal is the answer
        return failure(exc)
    return {"cell": conf._cell_size, "tokens": sizes.max_total_num_tokens, "swa": sizes.swa_max_total_num_tokens}


def op_env_number(case: dict[str, Any]) -> dict[str, Any]:
    """environ.py's EnvInt/EnvFloat on a value: what SGLang uses, and the warning it gives."""
    import os
    import warnings

    from sglang.srt.environ import envs

    name, old = case["name"], os.environ.get(case["name"])
    os.environ[name] = case["value"]
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            value = getattr(envs, name).get()
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
    return {"value": value, "warnings": [str(w.message) for w in seen if name in str(w.message)]}


def op_memory_messages(case: dict[str, Any]) -> dict[str, Any]:
    """MemoryPoolConfig's refusal of an empty pool; the prefill CUDA-graph sizes the memory heuristic counts."""
    from sglang.srt.arg_groups.cuda_graph_hook import generate_prefill_cuda_graph_batch_sizes
    from sglang.srt.model_executor.pool_configurator import MemoryPoolConfig

    try:
        MemoryPoolConfig(max_total_num_tokens=0, mem_fraction_static=case["mem_fraction_static"])
        error = None
    except RuntimeError as exc:
        error = str(exc)
    return {"error": error, "prefill_graph_sizes": len(generate_prefill_cuda_graph_batch_sizes(case["max_bs"]))}


OPS = {"kv_pool": op_kv_pool, "env_number": op_env_number, "memory_messages": op_memory_messages, "parse": op_parse, "head_slice": op_head_slice, "rank_map": op_rank_map, "handshake": op_handshake, "blocks": op_blocks,
       "mooncake_slice": op_mooncake_slice, "nixl_slice": op_nixl_slice, "mooncake_pages": op_mooncake_pages,
       "staging_layout": op_staging_layout, "pd_buffers": op_pd_buffers}


if __name__ == "__main__":
    serve(OPS)
