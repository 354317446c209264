"""The slurm: section and engine.container as the loader takes them: accepted forms, normalisation, and every
error with file:line:col and the fix (nodes without host, srtctl's key names, options pdctl renders itself)."""

from __future__ import annotations

import pytest

from pdctl.errors import UserError
from pdctl.topology import load_topology_text

HEAD = "name: t\nmodel: {path: openai/gpt-oss-20b}\n"
NODES = "nodes:\n  - {name: p0, gpu: h100, gpus: 8}\n  - {name: d0, gpu: h100, gpus: 8}\n"
ROLES = "prefill: {nodes: [p0]}\ndecode: {nodes: [d0]}\n"


def load(middle: str, nodes: str = NODES):
    return load_topology_text(HEAD + middle + nodes + ROLES, source="t.yaml")


def error(middle: str, nodes: str = NODES) -> str:
    with pytest.raises(UserError) as err:
        load(middle, nodes)
    return err.value.message


def test_a_full_slurm_section_loads_normalised() -> None:
    topo = load("slurm:\n  partition: gpu\n  account: llm\n  qos: high\n  time_limit: 4:00:00\n"
                "  reservation: r1\n  constraint: h100\n  gres: gpu:8\n  exclusive: false\n  job_name: pd\n"
                "  sbatch_directives: {mail-type: END, requeue: true, hold: false, d: afterok:1}\n"
                "  srun_options: [cpu-bind=none, --mpi=pmix]\n  setup: module load cuda\n"
                "  network_interface: ib0\n")
    slurm = topo.slurm
    assert slurm is not None
    assert slurm.time_limit == "4:00:00"  # YAML 1.1 reads it as 14400 (base 60): kept as written
    assert slurm.sbatch_directives == ["--mail-type=END", "--requeue", "-d afterok:1"]
    assert slurm.srun_options == ["--cpu-bind=none", "--mpi=pmix"] and slurm.setup == ["module load cuda"]
    assert [n.allocated for n in topo.nodes] == [True, True] and topo.nodes[0].address == "<p0>"
    assert load("slurm: {time_limit: 90}\n").slurm.time_limit == "90"  # minutes
    assert load("slurm: {}\n").slurm.exclusive is True


@pytest.mark.parametrize(("middle", "nodes", "expected"), [
    ("", NODES, "t.yaml:4:5: nodes[0]: required key 'host' missing (only with a slurm: or kubernetes: section"),
    ("slurm: {time: 10}\n", NODES, "t.yaml:3:9: slurm.time: unknown key 'time'; Slurm's --time is time_limit here"),
    ("slurm: {time_limit: 1h}\n", NODES, "slurm.time_limit: expected a Slurm time limit"),
    ("slurm: {gres: gpu:4, gpus_per_node: 4}\n", NODES, "slurm.gpus_per_node: set gres or gpus_per_node, not both"),
    ("slurm: {sbatch_directives: [--partition=x]}\n", NODES,
     "'--partition=x': pdctl renders #SBATCH --partition itself (from slurm.partition)"),
    ('slurm: {sbatch_directives: ["--comment=a\\nb"]}\n', NODES, "expected one line"),
    ("slurm: {sbatch_directives: [-C a100]}\n", NODES, "'-C a100': pdctl renders #SBATCH -C itself"),
    ("slurm: {srun_options: {container-image: x}}\n", NODES, "renders pyxis's --container-* options"),
    ("slurm: {srun_options: [--nodelist=a]}\n", NODES, "pdctl renders srun --nodelist itself"),
    ("slurm: {partition: 'a b'}\n", NODES, "slurm.partition: expected a name matching"),
    ("slurm: {}\n", ("nodes:\n  - {name: p0, gpu: h100, gpus: 8, ssh: {user: u}}\n  - {name: d0, host: h, gpu: h100, "
                     "gpus: 8}\n"), "nodes[0].ssh: a node without host (assigned by Slurm) is reached through srun, not ssh"),
    ("slurm: {}\n", ("nodes:\n  - {name: p0, gpu: h100, gpus: 8, advertise_host: 10.0.0.1}\n  - {name: d0, gpu: h100, "
                     "gpus: 8}\n"), "nodes[0].advertise_host: a node without host (assigned by Slurm) advertises the address read"),
    ("engine: {container: {image: x, mounts: ['models:/models']}}\n", NODES.replace("gpus: 8}", "gpus: 8, host: h}"),
     "mount 'models:/models': the source must be an absolute path"),
    ("engine: {container: {image: x, mounts: ['/a:/b:rx']}}\n", NODES.replace("gpus: 8}", "gpus: 8, host: h}"),
     "expected the flag ro or rw"),
    ("engine: {container: {mounts: []}}\n", NODES.replace("gpus: 8}", "gpus: 8, host: h}"),
     "engine.container.image: required key 'image' missing in engine.container"),
    ("engine: {container: {image: x, workdir: rel}}\n", NODES.replace("gpus: 8}", "gpus: 8, host: h}"),
     "engine.container.workdir: expected a name matching"),
])
def test_errors_name_the_place_and_the_fix(middle: str, nodes: str, expected: str) -> None:
    assert expected in error(middle, nodes)


def test_container_forms() -> None:
    nodes = NODES.replace("gpus: 8}", "gpus: 8, host: h}")
    topo = load("engine:\n  container:\n    image: lmsysorg/sglang:v0.5.4\n    mounts: {/data: /data, /hf: /root/hf}\n"
                "    env: {HF_HUB_OFFLINE: 1, DEBUG: true}\n    workdir: /w\n    docker_args: [--privileged]\n", nodes)
    container = topo.engine.container
    assert container is not None and container.mounts == ["/data:/data", "/hf:/root/hf"]
    assert container.env == {"HF_HUB_OFFLINE": "1", "DEBUG": "1"} and container.docker_args == ["--privileged"]
