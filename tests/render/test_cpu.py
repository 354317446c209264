"""SGLang's real server on CPU nodes (`gpu: cpu`, engine.kind sglang): what pdctl.render.cpu adds to the command
and environment, and that a GPU node's command never gets any of it. Every rendered command is parsed with SGLang
0.5.23's flag table (check-compat's flags-parse rule runs on the same table)."""

from __future__ import annotations

import yaml

from pdctl.render.cpu import CPU_FLAGS
from pdctl.render.deployment import render
from pdctl.runs.state import numerics_notes, write_deployment
from pdctl.sglang.argv import parse_argv
from pdctl.sglang.table import load_table
from pdctl.sglang_cpu import NUMERICS_NOTE, SERVE_MODULE
from pdctl.topology import load_topology, load_topology_text
from tests.support.paths import REPO

NIXL = REPO / "configs" / "local-cpu-sglang.yaml"
MOONCAKE = REPO / "configs" / "local-cpu-sglang-mooncake.yaml"
GPU = REPO / "configs" / "gpt-oss-20b-p2-d1-h100-nixl.yaml"


def workers(path):
    return {w.role: w for w in render(load_topology(path)).workers}


def values(argv):
    parsed = parse_argv(argv[3:], load_table("0.5.23"))
    assert not parsed.problems, parsed.problems
    return parsed.values


def test_cpu_node_runs_sglang_through_the_cpu_adaptations_with_cpu_flags_and_env():
    procs = workers(NIXL)
    for proc in procs.values():
        assert proc.argv[1:3] == ["-m", SERVE_MODULE]
        v = values(proc.argv)
        assert (v["device"], v["attention_backend"], v["sampling_backend"], v["grammar_backend"]) == \
            ("cpu", "torch_native", "pytorch", "none")
        assert v["skip_server_warmup"] and v["disable_overlap_schedule"]
        assert proc.env["SGLANG_USE_CPU_ENGINE"] == "1" and proc.env["SGLANG_HOST_IP"] == "127.0.0.1"
        assert proc.env["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] == "60"
        assert proc.env["UCX_TLS"] == "tcp"  # no CUDA transports on a CPU node
        assert str(REPO) in proc.env["PYTHONPATH"].split(":")
    assert values(procs["decode"].argv)["disaggregation_decode_retraction_backup"] == "cpu_tensor"
    assert values(procs["prefill"].argv)["disaggregation_decode_retraction_backup"] is None


def test_tp2_binds_one_core_per_rank_and_mooncake_runs_over_tcp():
    procs = workers(MOONCAKE)
    assert procs["prefill"].env["SGLANG_CPU_OMP_THREADS_BIND"] == "0|1"
    assert "SGLANG_CPU_OMP_THREADS_BIND" not in procs["decode"].env
    assert procs["prefill"].env["MOONCAKE_PROTOCOL"] == "tcp" and procs["decode"].env["MC_FORCE_TCP"] == "1"


def test_topology_keys_and_env_win_over_the_cpu_defaults():
    doc = yaml.safe_load(NIXL.read_text())
    doc["server"]["attention_backend"] = "intel_amx"
    doc["server"]["mem_fraction_static"] = 0.2
    doc["engine"]["env"] = {"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "9"}
    procs = {w.role: w for w in render(load_topology_text(yaml.safe_dump(doc))).workers}
    v = values(procs["prefill"].argv)
    assert (v["attention_backend"], str(v["mem_fraction_static"])) == ("intel_amx", "0.2")
    assert procs["prefill"].argv.count("--attention-backend") == 1
    assert procs["prefill"].env["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] == "9"


def test_a_gpu_node_gets_none_of_it():
    for proc in render(load_topology(GPU)).workers:
        assert proc.argv[1:3] == ["-m", "sglang.launch_server"]
        assert not set(CPU_FLAGS) & set(proc.argv)
        assert "SGLANG_USE_CPU_ENGINE" not in proc.env and "PYTHONPATH" not in proc.env


def test_gpt_oss_on_a_cpu_node_is_noted_as_not_gpt_oss_numerics_and_the_run_keeps_the_note(tmp_path):
    doc = yaml.safe_load(NIXL.read_text())
    doc["model"] = {"path": str(tmp_path / "not-made-yet"), "preset": "gpt-oss-20b"}  # judged by the preset's shape
    deployment = render(load_topology_text(yaml.safe_dump(doc)))
    assert NUMERICS_NOTE in deployment.notes and "not gpt-oss's" in NUMERICS_NOTE
    write_deployment(tmp_path / "run", deployment)
    assert numerics_notes(tmp_path / "run") == [NUMERICS_NOTE]  # what status, eval and parity print and report


def test_no_numerics_note_for_llama_on_cpu_nor_for_gpt_oss_on_gpus(tmp_path):
    for deployment in (render(load_topology(NIXL)), render(load_topology(GPU))):
        assert NUMERICS_NOTE not in deployment.notes
        write_deployment(tmp_path / deployment.topology, deployment)
        assert numerics_notes(tmp_path / deployment.topology) == []
    assert numerics_notes(tmp_path / "no-such-run") == [] and numerics_notes(None) == []
