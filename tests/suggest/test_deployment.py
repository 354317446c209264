"""A candidate as a topology: default machines, the skeleton's kept, SGLang's form of each role, placement that
fits where one exists, and the prediction section `bench serve` reads."""

from __future__ import annotations

import yaml

from pdctl.suggest.candidate import from_row
from pdctl.suggest.deployment import (
    candidate_data,
    default_skeleton,
    node_orders,
    prediction,
    to_yaml,
    topology_name,
    with_prediction,
)
from pdctl.topology import build_topology, load_topology_text
from pdctl.topology.placement import placement_problems
from tests.support.paths import CONFIGS_DIR


def _row(p_workers: int, p: tuple[int, int, int], d_workers: int, d: tuple[int, int, int], *, d_bs: int = 16,
         gpus: int = 8) -> dict:
    """An AIConfigurator-shaped row: (tp, dp, moe_ep) per side (attention TP, attention DP, expert parallel)."""
    row = {"(p)workers": p_workers, "(p)tp": p[0], "(p)dp": p[1], "(p)moe_ep": p[2], "(p)pp": 1, "(p)cp": 1,
           "(p)bs": 1, "(d)workers": d_workers, "(d)tp": d[0], "(d)dp": d[1], "(d)moe_ep": d[2], "(d)pp": 1,
           "(d)bs": d_bs, "(d)global_bs": d_bs * d[1], "num_total_gpus": gpus, "ttft": 100.0, "tpot": 20.0,
           "tokens/s/gpu": 1000.0, "request_rate": 5.0, "concurrency": d_bs * d[1] * d_workers,
           "tokens/s/user": 50.0}
    return row


def test_default_machines_cover_the_gpus_in_nodes_of_the_systems_size() -> None:
    sk = default_skeleton(name="x", system="gb300", gpus=6, gpus_per_node=4, model_path="openai/gpt-oss-120b",
                          preset="gpt-oss-120b", version="0.5.23", backend="nixl")
    assert [(n["name"], n["gpus"]) for n in sk["nodes"]] == [("n0", 4), ("n1", 2)]
    assert sk["prefill"]["nodes"] == sk["decode"]["nodes"] == ["n0", "n1"]
    assert topology_name("GPT-OSS-120b on GB300 / suggested!") == "gpt-oss-120b-on-gb300-suggested"


def test_roles_are_written_in_sglangs_form() -> None:
    # AIConfigurator's decode worker "tp1 dp4 moe_ep4" is SGLang's --tp-size 4 --dp-size 4 --enable-dp-attention
    # --ep-size 4; its batch per attention-DP rank x 4 is the server's --max-running-requests
    cand = from_row(_row(4, (1, 1, 1), 1, (1, 4, 4), d_bs=88), gpus=8)
    sk = default_skeleton(name="x", system="gb300", gpus=8, gpus_per_node=4, model_path="openai/gpt-oss-120b",
                          preset="gpt-oss-120b", version="0.5.23", backend="nixl")
    data = candidate_data(sk, cand)
    assert data["prefill"] == {"nodes": ["n0", "n1"], "replicas": 4, "tp": 1}
    assert data["decode"] == {"nodes": ["n0", "n1"], "replicas": 1, "tp": 4, "dp": 4, "enable_dp_attention": True,
                              "args": {"ep-size": 4, "max-running-requests": 352}}
    topo = build_topology(data)
    assert topo.decode.attn_tp == 1 and not placement_problems(topo)


def test_a_skeletons_roles_keep_their_own_keys_and_fall_back_to_all_nodes_when_they_are_too_small() -> None:
    sk = yaml.safe_load((CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml").read_text())
    sk["decode"]["args"] = {"ep-size": 2, "cuda-graph-max-bs": 64}
    assert node_orders(sk)[0] == (["p0"], ["d0"])
    cand = from_row(_row(6, (1, 1, 1), 1, (2, 1, 1)), gpus=8)  # 6 prefill GPUs: more than p0 has
    data = candidate_data(sk, cand)
    assert data["prefill"]["nodes"] == ["p0", "d0"] and data["prefill"]["port"] == 30000
    assert data["decode"]["args"] == {"cuda-graph-max-bs": 64, "max-running-requests": 16}  # ep 1: no --ep-size
    assert not placement_problems(build_topology(data))
    fits = candidate_data(sk, from_row(_row(4, (1, 1, 1), 1, (4, 1, 1)), gpus=8))
    assert (fits["prefill"]["nodes"], fits["decode"]["nodes"]) == (["p0"], ["d0"])  # the skeleton's own split
    # an EP the skeleton sets for every role is switched off where the candidate has none
    sk["server"]["args"] = {"ep-size": 4}
    data = candidate_data(sk, from_row(_row(4, (1, 1, 1), 1, (1, 4, 4)), gpus=8))
    assert data["prefill"]["args"] == {"ep-size": None} and data["decode"]["args"]["ep-size"] == 4


def test_the_prediction_section_is_a_valid_topology_section_and_the_file_reads_back() -> None:
    cand = from_row(_row(4, (1, 1, 1), 1, (1, 4, 4), d_bs=88), gpus=8)
    cand.ttft_ms, cand.tokens_per_s_per_gpu = 103.5, 999.0
    predicted = prediction(cand, isl=8192, osl=1024, ttft_ms=2000.0, itl_ms=30.0, source="test")
    sk = default_skeleton(name="x", system="gb300", gpus=8, gpus_per_node=4, model_path="openai/gpt-oss-120b",
                          preset="gpt-oss-120b", version="0.5.23", backend="nixl")
    text = to_yaml(with_prediction(candidate_data(sk, cand), predicted), ["first line", "", "third"])
    assert text.startswith("# first line\n#\n# third\nname: x\n")
    topo = load_topology_text(text)
    p = topo.bench.predicted
    assert (p.concurrency, p.isl, p.osl, p.ttft_ms, p.itl_ms) == (352, 8192, 1024, 103.5, 20.0)
    assert p.output_tok_s == 999.0 * 8 and p.targets.ttft_ms == 2000.0
    assert topo.bench.serve.concurrency == [352] and topo.bench.serve.osl == [1024]
