"""`pdctl bench-transfer`: move one request's KV between real prefill and decode ranks and time it.

The prefill ranks live in this process, the decode ranks in a child process (`bench_peer`), each rank with its
own backend endpoint, as in a deployment. Two paths carry the same bytes: SGLang's (per-token head slices on
unequal TP, whole pages on equal TP; addresses from pdctl.plan, the code check-compat uses) and a packed path
(one descriptor per page run, gather/scatter through staging). Every byte is verified on the decode side, and
a plain memcpy of the same byte count, measured in the same run, gives the yardstick the ratios refer to.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pdctl.bench.transfer.packed import chunk_ranges, gather, shape_pair_layout
from pdctl.bench.transfer.packed import descriptors as packed_descriptors
from pdctl.bench.transfer.peer import PeerProcess
from pdctl.bench.transfer.rankmem import KVShape, RankMemory, global_kv
from pdctl.errors import CheckFailed, UserError
from pdctl.plan import (
    decode_peers,
    head_slice_blocks,
    head_slice_params,
    page_blocks,
    ratio_ok,
)
from pdctl.plan.request import BenchConfig, config_from_topology, heads_note, kv_shape
from pdctl.transfer.backends import TransferError, create_backend, flatten_blocks
from pdctl.transfer.registry import NAMES

__all__ = ["BenchConfig", "config_from_topology", "heads_note", "memcpy_gbps", "run_bench"]
# The peer's own waits end after cfg.timeout; its setup and byte verification get this much on top.
PEER_SLACK_S = 120.0


def memcpy_gbps(nbytes: int, repeats: int = 3) -> float:
    """GB/s of one plain host memcpy of NBYTES (best of REPEATS, destination pre-faulted)."""
    src = np.ones(max(1, nbytes), dtype=np.uint8)
    dst = np.zeros_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e9


# Copies of the request's KV the bench holds at its peak, both processes together: the global KV in each
# process, prefill and decode rank pools, packed staging, and the memcpy reference's source and destination.
COPIES_AT_PEAK = 8


def request_bytes(shape: KVShape) -> int:
    """Bytes of one request's KV (K and V, every layer, all heads) in the shape's pools."""
    tokens = shape.full_layers * shape.full_pages + shape.swa_layers * shape.swa_pages
    return 2 * tokens * shape.page_size * shape.kv_heads * shape.head_bytes


def available_memory() -> int | None:
    """MemAvailable of this host in bytes (None where /proc/meminfo is missing)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def check_memory(shape: KVShape, tokens: int) -> None:
    """Refuse (exit 2) a request whose KV cannot fit this host's memory, before allocating any of it: an
    absurd --tokens must end in a message, not in the OOM killer picking a process."""
    need, have = COPIES_AT_PEAK * request_bytes(shape), available_memory()
    if have is not None and need > have:
        raise UserError(f"--tokens {tokens}: bench-transfer would need about {need / 2**30:.1f} GiB of host memory "
                        f"({COPIES_AT_PEAK} copies of the request's {request_bytes(shape) / 2**30:.2f} GiB of KV); "
                        f"{have / 2**30:.1f} GiB are available")


def run_bench(cfg: BenchConfig, peer: Any = None) -> dict[str, Any]:
    """Measure memcpy, the per-token path and the packed path side by side, `cfg.repeats` rounds after a
    warm-up that opens the connections, and return the JSON document.

    Why rounds: on a small shared machine any one timing can land in someone else's burst. Each round runs
    memcpy, per-token, memcpy, packed, memcpy back to back; the best of each (memcpy: best of all its
    measurements) gives the figures, so load hurts all three alike instead of skewing the ratio.
    """
    if cfg.backend not in NAMES:
        raise UserError(f"unknown backend {cfg.backend!r}: expected one of {', '.join(NAMES)}")
    if cfg.tokens < 1:
        raise UserError(f"--tokens must be positive, got {cfg.tokens}")
    if cfg.repeats < 1:
        raise UserError(f"--repeats must be positive, got {cfg.repeats}")
    if not ratio_ok(cfg.prefill_tp, cfg.decode_tp):
        raise UserError(f"attention TP sizes {cfg.prefill_tp} and {cfg.decode_tp}: neither divides the other")
    shape = kv_shape(cfg)
    check_memory(shape, cfg.tokens)
    peer = peer if peer is not None else PeerProcess(cfg.timeout + PEER_SLACK_S)
    backends: list[Any] = []
    try:
        peer.send(
            {
                "cmd": "setup",
                "backend": cfg.backend,
                "shape": shape.to_dict(),
                "prefill_tp": cfg.prefill_tp,
                "decode_tp": cfg.decode_tp,
                "seed": cfg.seed,
                "host": cfg.decode_host,
            }
        )
        remote = peer.recv()["ranks"]
        full, swa = global_kv(shape, cfg.seed)
        ranks = [RankMemory(shape, cfg.prefill_tp, p) for p in range(cfg.prefill_tp)]
        for mem in ranks:
            mem.fill({"full": full, "swa": swa})
        del full, swa
        for p, mem in enumerate(ranks):
            backend = create_backend(cfg.backend, f"bench-prefill{p}", host=cfg.prefill_host)
            backend.register(mem.regions())
            backends.append(backend)
        peers = {
            (p, d): backends[p].connect(remote[d]["metadata"])
            for p in range(cfg.prefill_tp)
            for d in decode_peers(cfg.prefill_tp, cfg.decode_tp, p)
        }
        pairs = sorted(peers)
        payload = _payload_bytes(cfg, shape, peers)
        _warm_up(cfg, peer, backends, peers, ranks, remote)
        token_work = _token_plan(cfg, peers, ranks, remote)
        packed_work = _packed_plan(cfg, shape, backends, peers, ranks, remote)
        copies: list[float] = []
        token_runs: list[dict[str, Any]] = []
        packed_runs: list[dict[str, Any]] = []
        for _ in range(cfg.repeats):
            copies.append(memcpy_gbps(payload))
            token_runs.append(_token_run(cfg, peer, backends, peers, token_work))
            copies.append(memcpy_gbps(payload))
            packed_runs.append(_packed_run(cfg, shape, peer, backends, peers, ranks, packed_work))
            copies.append(memcpy_gbps(payload))
        copy = max(copies)
        token, packed = _best(token_runs), _best(packed_runs)
    except TransferError as exc:  # the bench's verdict: the KV could not be moved (exit 1, not a crash)
        raise CheckFailed(f"KV transfer failed: {exc}{peer.exit_note()}") from exc
    finally:
        for backend in backends:
            backend.close()
        peer.close()
    for result in (token, packed):
        result["ratio_to_memcpy"] = result["gbps"] / copy if copy else 0.0
    return {
        "ok": token["verified"] and packed["verified"],
        "topology": cfg.name,
        "backend": cfg.backend,
        "tokens": cfg.tokens,
        "prefill_tp": cfg.prefill_tp,
        "decode_tp": cfg.decode_tp,
        "page_size": cfg.page_size,
        "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "elem_bytes": cfg.elem_bytes,
        "full_layers": shape.full_layers,
        "swa_layers": shape.swa_layers,
        "full_pages": shape.full_pages,
        "swa_pages": shape.swa_pages,
        "rank_pairs": len(pairs),
        "repeats": cfg.repeats,
        "memcpy_gbps": copy,
        "memcpy_runs_gbps": copies,
        "paths": {"per_token": token, "packed": packed},
    }


def _payload_bytes(cfg: BenchConfig, shape: KVShape, peers: dict[tuple[int, int], str]) -> int:
    """Bytes one request moves over all rank pairs (what both paths carry)."""
    total = 0
    for p, d in peers:
        hs = head_slice_params(cfg.prefill_tp, cfg.decode_tp, p, d, cfg.kv_heads)
        pages = shape.full_layers * shape.full_pages + shape.swa_layers * shape.swa_pages
        total += 2 * pages * cfg.page_size * hs.num_heads * shape.head_bytes
    return total


def _warm_up(cfg, peer, backends, peers, ranks, remote) -> None:  # type: ignore[no-untyped-def]
    """One tiny write + notification per pair, so connection setup is not timed."""
    peer.send({"cmd": "run", "path": "warmup", "expect": len(peers), "timeout": cfg.timeout})
    peer.recv()
    handles = []
    for (p, d), name in peers.items():
        src = np.asarray([ranks[p].full.ctypes.data], dtype=np.uint64)
        dst = np.asarray([remote[d]["pools"]["full"]["ptrs"][0]], dtype=np.uint64)
        handles.append(
            (p, backends[p].write(name, src, dst, np.asarray([8], np.uint64), f"done warmup {p}".encode()))
        )
    for p, h in handles:
        backends[p].wait(h, cfg.timeout)
    peer.recv()


def _pool_args(
    mem: RankMemory, remote_rank: dict[str, Any], name: str
) -> tuple[list[int], list[int], list[int], list[int]]:
    pool = mem.pools()[name]
    dst = remote_rank["pools"][name]
    return mem.kv_ptrs(pool), mem.item_lens(pool), dst["ptrs"], dst["item_lens"]


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest run of a path; it counts as verified only if every run verified."""
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["verified"] = all(r["verified"] for r in runs)
    best["mismatched_bytes"] = max(r["mismatched_bytes"] for r in runs)
    best["errors"] = [e for r in runs for e in r["errors"]]
    best["runs_seconds"] = [r["seconds"] for r in runs]
    best["runs_gbps"] = [r["gbps"] for r in runs]
    return best


def _token_plan(cfg, peers, ranks, remote) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """SGLang's path: per-token head slices (unequal TP) or whole pages (equal TP), built by pdctl.plan."""
    t_plan = time.perf_counter()
    work = {}
    for p, d in peers:
        blocks = []
        for name in ranks[p].pools():
            sp, sl, dp, dl = _pool_args(ranks[p], remote[d], name)
            pages = ranks[p].page_ids(name)
            if cfg.prefill_tp == cfg.decode_tp:
                blocks += page_blocks(sp, sl, dp, dl, pages, pages)
            else:
                blocks += head_slice_blocks(
                    sp,
                    sl,
                    dp,
                    dl,
                    pages,
                    pages,
                    page_size=cfg.page_size,
                    src_tp=cfg.prefill_tp,
                    src_rank=p,
                    dst_tp=cfg.decode_tp,
                    dst_rank=d,
                    total_kv_heads=cfg.kv_heads,
                )
        work[(p, d)] = flatten_blocks(blocks)
    return {"work": work, "plan_s": time.perf_counter() - t_plan}


def _token_run(cfg, peer, backends, peers, plan) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """One timed run of the per-token path (the decode side clears its pools before and verifies after)."""
    work, plan_s = plan["work"], plan["plan_s"]
    peer.send({"cmd": "run", "path": "token", "expect": len(peers), "timeout": cfg.timeout})
    peer.recv()
    t0 = time.monotonic()
    handles = [
        (p, backends[p].write(peers[(p, d)], *work[(p, d)], f"done token {p}".encode()))
        for (p, d) in sorted(peers)
    ]
    for p, h in handles:
        backends[p].wait(h, cfg.timeout)
    wire_s = time.monotonic() - t0
    res = peer.recv()
    total_s = max(res["done_at"] - t0, wire_s)
    nbytes = int(sum(int(w[2].sum()) for w in work.values()))
    return _result(
        "head-slice" if cfg.prefill_tp != cfg.decode_tp else "page",
        nbytes,
        sum(int(w[0].size) for w in work.values()),
        total_s,
        wire_s,
        res,
        plan_s=plan_s,
    )


def _packed_plan(cfg, shape, backends, peers, ranks, remote) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Gather (if the prefill rank holds more heads), one descriptor per page run, scatter (if decode does):
    plans, registered staging buffers and descriptors, built once for every run."""
    layers = shape.pool_layers()
    plans, staging, descs = {}, {}, {}
    for p, d in peers:
        pages = {name: ranks[p].page_ids(name) for name in layers}
        plan = shape_pair_layout(shape, pages, src_tp=cfg.prefill_tp, dst_tp=cfg.decode_tp, src_rank=p, dst_rank=d)
        plans[(p, d)] = plan
        if plan.gather:
            staging[(p, d)] = buf = np.zeros(plan.nbytes, dtype=np.uint8)
            backends[p].register([(int(buf.ctypes.data), int(buf.nbytes))])
        pool_args = {n: _pool_args(ranks[p], remote[d], n) for n in layers}
        src_pools = {n: (sl[0], sp) for n, (sp, sl, _, _) in pool_args.items()}
        dst_pools = {n: (dl[0], dp) for n, (_, _, dp, dl) in pool_args.items()}
        descs[(p, d)] = packed_descriptors(
            plan,
            src_base=int(staging[(p, d)].ctypes.data) if plan.gather else 0,
            dst_base=int(remote[d]["staging"].get(str(p), 0)),
            src_pools=src_pools,
            dst_pools=dst_pools,
        )
    chunks = {pair: chunk_ranges(len(plan.segments)) for pair, plan in plans.items()}
    writes = sum(len(c) for c in chunks.values())
    nbytes = sum(plan.nbytes for plan in plans.values())
    n_desc = sum(int(x[0].size) for x in descs.values())
    return {
        "plans": plans,
        "staging": staging,
        "descs": descs,
        "chunks": chunks,
        "writes": writes,
        "nbytes": nbytes,
        "n_desc": n_desc,
    }


def _packed_run(cfg, shape, peer, backends, peers, ranks, work) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """One timed run of the packed path."""
    plans, staging, descs, chunks = work["plans"], work["staging"], work["descs"], work["chunks"]
    writes, nbytes, n_desc = work["writes"], work["nbytes"], work["n_desc"]
    peer.send({"cmd": "run", "path": "packed", "expect": writes, "timeout": cfg.timeout})
    peer.recv()
    t0 = time.monotonic()
    gather_s = 0.0
    handles = []
    # Chunk by chunk over all pairs: the decode side scatters chunk i while chunk i+1 is in flight.
    for c in range(max(len(v) for v in chunks.values())):
        for p, d in sorted(peers):
            if c >= len(chunks[(p, d)]):
                continue
            part = chunks[(p, d)][c]
            if plans[(p, d)].gather:
                t = time.monotonic()
                gather(
                    plans[(p, d)],
                    ranks[p].pools(),
                    staging[(p, d)],
                    cfg.page_size,
                    shape.head_bytes,
                    part,
                )
                gather_s += time.monotonic() - t
            src, dst, lens = (a[part.start : part.stop] for a in descs[(p, d)])
            note = f"done packed {p} {c}".encode()
            handles.append((p, backends[p].write(peers[(p, d)], src, dst, lens, note)))
    for p, h in handles:
        backends[p].wait(h, cfg.timeout)
    wire_s = time.monotonic() - t0 - gather_s
    res = peer.recv()
    total_s = max(res["done_at"] - t0, wire_s + gather_s)
    return _result("packed", nbytes, n_desc, total_s, wire_s, res, gather_s=gather_s) | {"writes": writes}


def _result(
    kind: str, nbytes: int, n_desc: int, total_s: float, wire_s: float, res: dict[str, Any], **extra: float
) -> dict[str, Any]:
    return {
        "kind": kind,
        "descriptors": n_desc,
        "bytes": nbytes,
        "seconds": total_s,
        "gbps": nbytes / total_s / 1e9 if total_s > 0 else 0.0,
        "wire_seconds": wire_s,
        "wire_gbps": nbytes / wire_s / 1e9 if wire_s > 0 else 0.0,
        "scatter_seconds": res["scatter_s"],
        **{k.replace("_s", "_seconds"): v for k, v in extra.items()},
        "mismatched_bytes": res["mismatched_bytes"],
        "errors": res["errors"],
        "verified": res["mismatched_bytes"] == 0 and not res["errors"],
    }
