"""Rendering: SGLang / reference / router commands, checked against SGLang's own flags.

SGLang cannot be imported in the test venv (it needs torch, zmq, triton, ...), so pdctl ships its parser's
flags per release (pdctl/sglang/flags, dumped by scripts/sglang-flags/); every rendered command is parsed with
pdctl.sglang.argv over the 0.5.23 table here, and with SGLang's real parser in the side venv (`sglang_python`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pdctl.render.deployment import render
from pdctl.sglang.argv import parse_argv
from pdctl.sglang.table import load_table
from pdctl.topology import load_topology, load_topology_text
from tests.support.launch_samples import CONFIGS, SGLANG_BASE
from tests.support.paths import REPO


def sglang_args(argv: list[str]) -> list[str]:
    # a CPU node (`gpu: cpu`) runs SGLang's launch_server through pdctl's CPU adaptations (tests/render/test_cpu.py)
    assert argv[1:3] in (["-m", "sglang.launch_server"], ["-m", "pdctl.sglang_cpu.serve"]), argv
    return argv[3:]


def parse(argv: list[str], version: str = "0.5.23") -> SimpleNamespace:
    """The rendered flags parsed with SGLang VERSION's flag table: the flags given, as text (as the command
    line says them); every other dest None."""
    parsed = parse_argv(sglang_args(argv), load_table(version))
    assert not parsed.problems, f"not SGLang {version} flags: {parsed.problems}"
    text = {d: (None if d not in parsed.given or v is None else (v if isinstance(v, (bool, list)) else str(v)))
            for d, v in parsed.values.items()}
    text = {d: ([str(x) for x in v] if isinstance(v, list) else v) for d, v in text.items()}
    return SimpleNamespace(**text)


def sglang_configs() -> list[Path]:
    return [p for p in CONFIGS if load_topology(p).engine.kind == "sglang"]


@pytest.mark.parametrize("config", sglang_configs(), ids=lambda p: p.stem)
def test_every_example_config_renders_sglang_flags(config: Path) -> None:
    topo = load_topology(config)
    plan = render(topo)
    assert plan.workers
    for proc in plan.workers:
        args = parse(proc.argv)
        assert args.disaggregation_mode == (None if proc.role == "colocated" else proc.role)
        assert int(args.port) == int(proc.url.rsplit(":", 1)[1]) if proc.url else True
        assert shlex.split(proc.command)[-len(proc.argv) :] == proc.argv  # copy-pasteable


def test_variant_renders_every_topology_key() -> None:
    topo = load_topology_text(SGLANG_BASE)
    plan = render(topo)
    prefills = [p for p in plan.workers if p.role == "prefill"]
    decodes = [p for p in plan.workers if p.role == "decode"]
    assert [p.name for p in prefills] == ["prefill-0", "prefill-1"]
    assert [p.name for p in decodes] == ["decode-0", "decode-0-n1"]
    p0, p1 = (parse(p.argv) for p in prefills)
    assert (p0.base_gpu_id, p1.base_gpu_id) == (None, "4")
    assert (p0.disaggregation_bootstrap_port, p1.disaggregation_bootstrap_port) == ("8998", "8999")
    assert (p0.port, p1.port) == ("30000", "30001")
    assert p0.disaggregation_ib_device == "mlx5_0,mlx5_1"
    assert p0.revision == "main" and p0.kv_cache_dtype == "fp8_e4m3" and p0.page_size == "64"
    assert (
        p0.disable_hybrid_swa_memory
        and p0.enable_unified_memory
        and not p0.disaggregation_decode_enable_radix_cache
    )
    assert (p0.attention_backend, p0.chunked_prefill_size, p0.context_length) == ("triton", "8192", "32768")
    assert (p0.max_total_tokens, p0.mem_fraction_static, p0.random_seed) == ("100000", "0.8", "7")
    assert p0.enable_metrics and p0.log_level == "info" and p0.cuda_graph_bs_decode == ["1", "2", "4"]
    assert "--disable-radix-cache" not in prefills[0].argv  # false = omitted
    assert prefills[0].env["SGLANG_DISAGG_STAGING_BUFFER"] == "1"
    # decode: one replica of tp 16 spans d0 and d1 -> two node ranks, attention DP in 0.5.23's spelling
    d0, d1 = (parse(p.argv) for p in decodes)
    assert (d0.tp_size, d0.nnodes, d0.node_rank, d1.node_rank) == ("16", "2", "0", "1")
    assert d0.dist_init_addr == d1.dist_init_addr == "10.0.0.12:31100"
    assert d0.attn_dp_size == "16" and d0.dp_size == "1" and not d0.enable_dp_attention
    assert d0.disaggregation_decode_enable_radix_cache
    assert d0.disaggregation_bootstrap_port == "8998"
    assert decodes[0].url == "http://10.0.0.12:30100" and decodes[1].url is None
    assert [decodes[0].host, decodes[1].host] == ["10.0.0.12", "10.0.0.13"]
    # router: every prefill with its bootstrap port, the decode head, policy, the derived prometheus port
    r = plan.router.argv
    assert r[1:4] == ["-m", "sglang_router.launch_router", "--pd-disaggregation"]
    joined = shlex.join(r)
    assert "--prefill http://10.0.0.11:30000 8998 --prefill http://10.0.0.11:30001 8999" in joined
    assert "--decode http://10.0.0.12:30100 --host 0.0.0.0 --port 8000 --policy round_robin" in joined
    assert "--prometheus-port 8001 --prometheus-host 0.0.0.0 --shutdown-grace-period-secs 5" in joined
    assert plan.router.ports == [8000, 8001] and plan.router.metrics_url == "http://10.0.0.11:8001/metrics"
    assert r[-2:] == ["--log-level", "debug"]
    assert plan.router_url == "http://10.0.0.11:8000"


def test_router_flags_parse_with_sglang_router() -> None:
    from sglang_router.launch_router import parse_router_args

    plan = render(load_topology_text(SGLANG_BASE))
    args = parse_router_args(plan.router.argv[3:])
    assert args.pd_disaggregation and args.policy == "round_robin" and args.prometheus_port == 8001
    assert args.prefill_urls == [("http://10.0.0.11:30000", 8998), ("http://10.0.0.11:30001", 8999)]
    assert args.decode_urls == ["http://10.0.0.12:30100"]


def test_router_recovers_in_seconds_and_router_args_win() -> None:
    """The health-check and circuit-breaker settings (pdctl.render.router.RECOVERY_FLAGS) reach sglang-router's
    own parser as the values a resumed worker is taken back with in seconds; a `router.args` value replaces one."""
    from sglang_router.launch_router import parse_router_args

    args = parse_router_args(render(load_topology_text(SGLANG_BASE)).router.argv[3:])
    assert (args.health_check_interval_secs, args.health_check_timeout_secs) == (2, 3)
    assert (args.health_failure_threshold, args.health_success_threshold) == (2, 1)
    assert (args.cb_timeout_duration_secs, args.cb_success_threshold, args.retry_max_backoff_ms) == (5, 1, 2000)
    text = SGLANG_BASE.replace("args: {log-level: debug}", "args: {log-level: debug, cb-timeout-duration-secs: 30}")
    assert text != SGLANG_BASE
    argv = render(load_topology_text(text)).router.argv
    assert parse_router_args(argv[3:]).cb_timeout_duration_secs == 30 and argv.count("--cb-timeout-duration-secs") == 1


@pytest.mark.parametrize("version", ["0.5.2", "0.5.16", "0.5.21"])
def test_older_version_uses_the_deprecated_dp_attention_spelling(version: str) -> None:
    # releases without --attn-dp-size (their flag tables say so) get --dp-size N --enable-dp-attention
    topo = load_topology_text(SGLANG_BASE.replace('version: "0.5.23"', f'version: "{version}"'))
    decode = next(p for p in render(topo).workers if p.role == "decode")
    args = parse(decode.argv, "0.5.16" if version == "0.5.2" else version)
    assert args.enable_dp_attention and args.dp_size == "16" and "--attn-dp-size" not in decode.argv


def test_attn_dp_size_from_0_5_22() -> None:
    topo = load_topology_text(SGLANG_BASE.replace('version: "0.5.23"', 'version: "0.5.22"'))
    decode = next(p for p in render(topo).workers if p.role == "decode")
    args = parse(decode.argv, "0.5.22")
    assert args.attn_dp_size == "16" and args.dp_size == "1" and "--enable-dp-attention" not in decode.argv


def test_mooncake_tcp_is_sglangs_mooncake_tcp_backend() -> None:
    text = SGLANG_BASE.replace("backend: nixl, protocol: rdma", "backend: mooncake, protocol: tcp")
    for proc in render(load_topology_text(text)).workers:
        args = parse(proc.argv)
        assert args.disaggregation_transfer_backend == "mooncake_tcp"
        assert args.disaggregation_ib_device is None  # ignored by SGLang for TCP: not rendered


def test_pinned_cuda_visible_devices_select_the_slot() -> None:
    text = SGLANG_BASE.replace(
        "python: /opt/venv/bin/python}",
        'python: /opt/venv/bin/python, env: {CUDA_VISIBLE_DEVICES: "7,6,5,4,3,2,1,0"}}',
    )
    prefills = [p for p in render(load_topology_text(text)).workers if p.role == "prefill"]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in prefills] == ["7,6,5,4", "3,2,1,0"]
    assert all("--base-gpu-id" not in p.argv for p in prefills)


def test_passthrough_arg_overrides_a_rendered_flag() -> None:
    text = SGLANG_BASE.replace("log-level: info,", "log-level: info, page-size: 32,")
    proc = render(load_topology_text(text)).workers[0]
    assert proc.argv.count("--page-size") == 1 and parse(proc.argv).page_size == "32"


def test_injection_text_stays_one_literal_argument() -> None:
    evil = "x; rm -rf / #$(touch /tmp/pdctl-pwned)`id`"
    text = SGLANG_BASE.replace("path: openai/gpt-oss-120b", f"path: {json.dumps(evil)}")
    text = text.replace("log-level: info,", f"served-model-name: {json.dumps(evil)},")
    proc = render(load_topology_text(text)).workers[0]
    assert proc.argv[proc.argv.index("--served-model-name") + 1] == evil
    assert evil in proc.argv or any(a.endswith(evil.split("/")[-1]) for a in proc.argv)
    assert shlex.split(proc.command)[-len(proc.argv) :] == proc.argv


def test_reference_engine_renders_its_own_command(tmp_path: Path) -> None:
    topo = load_topology(CONFIGS[[p.stem for p in CONFIGS].index("local-cpu")])
    plan = render(topo)
    prefill, decode = plan.workers
    assert prefill.argv[1:3] == ["-m", "pdctl.reference"]
    for proc, role, tp in ((prefill, "prefill", "2"), (decode, "decode", "1")):
        argv = proc.argv
        assert argv[argv.index("--role") + 1] == role and argv[argv.index("--tp") + 1] == tp
        assert argv[argv.index("--disaggregation-transfer-backend") + 1] == "nixl"
        assert Path(argv[argv.index("--model-path") + 1]).is_absolute()
    assert prefill.ports == [31000, 31998] and decode.ports == [31100]


def test_real_sglang_parser_accepts_every_rendered_command(sglang_python: str) -> None:
    commands = [sglang_args(p.argv) for c in sglang_configs() for p in render(load_topology(c)).workers]
    commands += [sglang_args(p.argv) for p in render(load_topology_text(SGLANG_BASE)).workers]
    script = (
        "import argparse, json, sys\n"
        "from sglang.srt.server_args import ServerArgs\n"
        "commands = json.load(sys.stdin)\n"
        "for argv in commands:\n"
        "    parser = argparse.ArgumentParser()\n"
        "    ServerArgs.add_cli_args(parser)\n"
        "    parser.parse_args(argv)\n"
        "print('parsed', len(commands))\n"
    )
    done = subprocess.run(
        [sglang_python, "-c", script],
        input=json.dumps(commands),
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"parsed {len(commands)}" in done.stdout


COLOCATED_CONFIG = CONFIGS[[p.stem for p in CONFIGS].index("local-cpu-reference")]


@pytest.mark.parametrize("replicas", [1, 2])
def test_colocated_renders_plain_sglang_servers_and_a_regular_router(replicas: int) -> None:
    doc = yaml.safe_load(COLOCATED_CONFIG.read_text())
    doc["engine"] = {"kind": "sglang", "version": "0.5.23"}
    doc["nodes"][0]["gpus"] = 4
    doc["nodes"][0]["gpu"] = "h100"  # GPU servers (a `gpu: cpu` node runs SGLang on CPU: tests/render/test_cpu.py)
    doc["colocated"]["replicas"] = replicas
    # a transfer: section is ignored in colocated mode: nothing of it may reach the commands
    doc["transfer"] = {"backend": "mooncake", "protocol": "rdma", "staging_buffer": True, "ib_device": "mlx5_0"}
    plan = render(load_topology_text(yaml.safe_dump(doc)))
    assert [p.name for p in plan.workers] == [f"colocated-{i}" for i in range(replicas)]
    for i, proc in enumerate(plan.workers):
        args = parse(proc.argv)  # every flag is SGLang 0.5.23's
        assert not [a for a in proc.argv if a.startswith("--disaggregation")], proc.argv
        assert (args.tp_size, args.page_size, args.port) == ("1", "16", str(31500 + i))
        assert args.base_gpu_id == (str(i) if i else None)
        assert proc.ports == [31500 + i] and "SGLANG_DISAGG_STAGING_BUFFER" not in proc.env
    from sglang_router.launch_router import parse_router_args

    router = parse_router_args(plan.router.argv[3:])
    assert not router.pd_disaggregation and router.prometheus_port == 31851  # router.port + 1
    assert router.worker_urls == [f"http://127.0.0.1:{31500 + i}" for i in range(replicas)]
    assert "--pd-disaggregation" not in plan.router.argv and plan.router_url == "http://127.0.0.1:31850"


def test_colocated_reference_engine_command() -> None:
    from pdctl.reference.args import build_parser

    (proc,) = render(load_topology(COLOCATED_CONFIG)).workers
    assert proc.argv[1:3] == ["-m", "pdctl.reference"] and proc.role == "colocated"
    args, unknown = build_parser().parse_known_args(proc.argv[3:])
    assert not unknown and args.role == "colocated" and args.tp == 1 and args.port == 31500
    assert not [a for a in proc.argv if a.startswith("--disaggregation")], proc.argv
    assert proc.ports == [31500] and proc.health_path == "/health"


def _workers(text: str) -> list:
    return render(load_topology_text(text)).workers


@pytest.mark.parametrize("layout,env", [("nhd", {}), ("hnd", {"SGLANG_USE_HND_KVCACHE": "1"}),
                                        ("vectorized_5d", {"SGLANG_AITER_KV_CACHE_LAYOUT": "vectorized_5d"})])
def test_kv_layout_is_rendered_where_sglang_reads_it(layout: str, env: dict) -> None:
    text = SGLANG_BASE.replace("  page_size: 64\n", f"  page_size: 64\n  kv_layout: {layout}\n")
    for proc in _workers(text):
        rendered = {k: v for k, v in proc.env.items() if k in ("SGLANG_USE_HND_KVCACHE", "SGLANG_AITER_KV_CACHE_LAYOUT")}
        assert rendered == env
    # the rejected and the passing layout no longer render the same commands
    assert _workers(text)[0].command != _workers(SGLANG_BASE)[0].command or layout == "nhd"


def test_nixl_over_tcp_tells_ucx_to_use_tcp_and_engine_env_wins() -> None:
    tcp = SGLANG_BASE.replace("backend: nixl, protocol: rdma", "backend: nixl, protocol: tcp")
    assert {p.env.get("UCX_TLS") for p in _workers(tcp)} == {"tcp,cuda_copy,cuda_ipc,sm"}
    assert all("UCX_TLS" not in p.env for p in _workers(SGLANG_BASE))  # rdma: UCX picks its transports
    pinned = tcp.replace("python: /opt/venv/bin/python}", 'python: /opt/venv/bin/python, env: {UCX_TLS: "tcp"}}')
    assert {p.env["UCX_TLS"] for p in _workers(pinned)} == {"tcp"}
    mooncake = SGLANG_BASE.replace("backend: nixl, protocol: rdma", "backend: mooncake, protocol: tcp")
    assert all("UCX_TLS" not in p.env for p in _workers(mooncake))  # mooncake_tcp needs nothing from UCX


def test_sglang_workers_serve_metrics_unless_the_topology_says_not() -> None:
    """`pdctl status` reads each worker's /metrics, which SGLang serves only with --enable-metrics: it is
    rendered by default, once, and `args: {enable-metrics: false}` leaves it out."""
    from tests.support.topologies import MINIMAL

    plan = render(load_topology_text(MINIMAL))
    assert plan.workers and all(p.argv.count("--enable-metrics") == 1 for p in plan.workers)
    off = yaml.safe_load(MINIMAL)
    off["server"] = {**(off.get("server") or {}), "args": {"enable-metrics": False}}
    plan = render(load_topology_text(yaml.safe_dump(off)))
    assert plan.workers and not any("--enable-metrics" in p.argv for p in plan.workers)


def test_reference_engine_on_sglang_stack_runs_in_sglangs_interpreter(monkeypatch, tmp_path: Path) -> None:
    """transfer.stack: sglang: the PD roles run SGLang's transfer code, so the engine starts with SGLang's
    interpreter (PDCTL_SGLANG_PYTHON here), this pdctl on its PYTHONPATH, and --transfer-stack sglang."""
    from pdctl.sglang_stack.launcher import PDCTL_ROOT

    side = tmp_path / "bin" / "python"
    side.parent.mkdir()
    side.write_text("")
    monkeypatch.setenv("PDCTL_SGLANG_PYTHON", str(side))
    topo = load_topology(CONFIGS[[p.stem for p in CONFIGS].index("local-cpu-sglang-stack")])
    assert topo.transfer.stack == "sglang"
    for proc in render(topo).workers:
        assert proc.argv[0] == str(side) and proc.argv[1:3] == ["-m", "pdctl.reference"]
        assert proc.argv[proc.argv.index("--transfer-stack") + 1] == "sglang"
        assert proc.env["PYTHONPATH"].split(":")[0] == PDCTL_ROOT
    plain = load_topology(CONFIGS[[p.stem for p in CONFIGS].index("local-cpu")])
    assert plain.transfer.stack == "pdctl"
    assert all("--transfer-stack" not in p.argv and "PYTHONPATH" not in p.env for p in render(plain).workers)


def test_sglang_workers_are_given_the_time_their_health_check_takes() -> None:
    # SGLang's /health runs a one-token generate and answers within SGLANG_HEALTH_CHECK_TIMEOUT (20 s by default):
    # liveness and status wait that long (+5 s) before calling a running worker silent; the router answers at once
    doc = yaml.safe_load((REPO / "configs" / "local-cpu-sglang.yaml").read_text())
    plain = render(load_topology_text(yaml.safe_dump(doc)))
    assert {w.health_timeout_s for w in plain.workers} == {25.0}
    assert plain.router is not None and plain.router.health_timeout_s is None
    doc["engine"]["env"] = {"SGLANG_HEALTH_CHECK_TIMEOUT": "40"}
    assert {w.health_timeout_s for w in render(load_topology_text(yaml.safe_dump(doc))).workers} == {45.0}
