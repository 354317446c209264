"""The transfer libraries' and the router's words: NIXL/UCX, Mooncake, sglang-router (quoted from the binaries
pdctl installs: `strings` of nixl_cu12's libraries, mooncake's transfer engine, sglang_router_rs 0.3.2)."""

from __future__ import annotations

from pdctl.diagnose.signature import Signature

NIXL = "NIXL/UCX"
ROUTER = "sglang-router"
ROUTER_SO = "sglang_router/sglang_router_rs.abi3.so 0.3.2 (src/routers/http/pd_router.rs, src/core/circuit_breaker.rs)"

SIGNATURES = (
    Signature(
        "nixl-vram-registration", NIXL, r"VRAM registration cannot proceed",
        "NIXL/UCX cannot register GPU memory: UCX has no CUDA transport (a UCX without cuda support shadows the one "
        "NIXL ships, or the driver lacks GPUDirect / nvidia-peermem)",
        "run `pdctl preflight` (it names the UCX library and transports); use the UCX bundled with nixl (unset "
        "LD_LIBRARY_PATH entries of another UCX) or set UCX_TLS to include cuda_copy,cuda_ipc",
        "nixl_cu12 1.5.1 libplugin_UCX.so (\"VRAM memory is detected as host by UCX\")", "https://github.com/ai-dynamo/nixl/issues/334"),
    Signature(
        "nixl-err-backend", NIXL, r"NIXL_ERR_BACKEND",
        "a NIXL backend call failed inside UCX: most often memory registration (registerMem) when UCX cannot "
        "handle the memory kind, or a UCX conflicting with the one NIXL ships",
        "look at the UCX lines just before it; `pdctl preflight` checks UCX transports and devices; "
        "UCX_LOG_LEVEL=info in engine.env shows the transport chosen",
        "nixl/_api.py (nixl._bindings.nixlBackendError)", "https://github.com/ai-dynamo/nixl/issues/177"),
    Signature(
        "nixl-err-other", NIXL,
        r"NIXL_ERR_(NOT_FOUND|INVALID_PARAM|MISMATCH|NOT_ALLOWED|NOT_POSTED|NOT_SUPPORTED|REPOST_ACTIVE|UNKNOWN)",
        "a NIXL call was refused (an unknown peer agent or descriptor, a mismatched descriptor list, or a "
        "transfer posted twice): the two sides' NIXL metadata disagree, often after one side restarted",
        "restart both roles of the pair (`pdctl restart prefill:N`, `decode:N`) so they exchange metadata again; "
        "check both run the same nixl version (`pdctl preflight`)",
        "nixl_cu12 libnixl (nixl_status_t names)"),
    Signature(
        "ucx-error", NIXL, r"UCX\s+ERROR",
        "UCX failed below NIXL (transport, device or memory registration; the line says which)",
        "check UCX_NET_DEVICES / UCX_TLS in engine.env against the node's devices (`pdctl preflight`)",
        "libucp (ucs_error)", "https://github.com/ai-dynamo/nixl/issues/149"),
    Signature(
        "mooncake-transfer-timeout", "Mooncake", r"Failed to complete transfers after \d+ seconds",
        "Mooncake's transfer engine posted the KV writes and they never completed (the peer or the fabric "
        "stopped)", "check the peer's log and the RDMA devices (MOONCAKE_DEVICE / --disaggregation-ib-device); "
        "`pdctl bench-transfer` tests the path alone",
        "mooncake transfer engine (transfer_task.cpp)", "https://github.com/kvcache-ai/Mooncake/issues/1088"),
    Signature(
        "mooncake-handshake", "Mooncake",
        r"handshake (RPC )?failed|Failed to connect to (target|segment)|TcpTransport: ASIO exception",
        "Mooncake's transfer engine could not reach the peer's endpoint (handshake or connect refused)",
        "check that the peer runs and that the addresses it registered are reachable from here (firewall, "
        "--host, MOONCAKE_* env); `pdctl preflight` runs a cross-node transfer",
        "mooncake transfer engine (transfer_metadata, tcp_transport.cpp)",
        "https://github.com/kvcache-ai/Mooncake/issues/292"),
    Signature(
        "mooncake-register-memory", "Mooncake",
        r"Failed to register memory|DMA BUF supported required for GPU RDMA without nvidia-peermem",
        "Mooncake could not register the KV buffers with the RDMA device (no nvidia-peermem / DMA-BUF, or "
        "memory limits)", "load nvidia-peermem or use a kernel/driver with DMA-BUF; `ulimit -l unlimited`",
        "mooncake transfer engine (rdma_context.cpp)", "https://github.com/kvcache-ai/Mooncake/issues/281"),
    Signature(
        "router-breaker-open", ROUTER, r"Circuit breaker state transition: \w+ -> open",
        "the router's circuit breaker opened for a worker after repeated failures and routes nothing to it "
        "until it half-opens (60 s by default)",
        "fix the worker failures before it (listed first); `--cb-timeout-duration-secs` shortens the wait, "
        "restarting the router (`pdctl restart router`) closes it", ROUTER_SO,
        "https://github.com/sgl-project/sglang/issues/31206", blames="worker"),
    Signature(
        "router-no-prefill", ROUTER, r"No (available )?prefill workers( available)?",
        "the router has no prefill worker it may use (all dead, unhealthy or behind an open circuit breaker)",
        "look at the prefill workers' failures (listed first); `pdctl status` shows their health",
        ROUTER_SO, "https://github.com/sgl-project/sglang/issues/12355", blames="prefill"),
    Signature(
        "router-no-decode", ROUTER, r"No (available )?decode workers( available)?",
        "the router has no decode worker it may use (all dead, unhealthy or behind an open circuit breaker)",
        "look at the decode workers' failures (listed first); `pdctl status` shows their health",
        ROUTER_SO, blames="decode"),
)
