"""engine.container rendered for each way pdctl reaches a node: `docker run` on local and ssh nodes, pyxis's
`srun --container-*` options on Slurm.

Both renders run the same thing: the command (with its `env K=V` in front) inside the image, on the host's
network (servers bind the node's own addresses; RDMA and NCCL need the host's interfaces), with the host's
IPC namespace (NCCL/CUDA IPC between the ranks of one node), unlimited locked memory (RDMA registration of
the KV pool) and a large stack; GPUs on GPU nodes; the InfiniBand devices for RDMA. The docker flags are the
ones SGLang's own docker instructions and srtctl use (`--network host --ipc host --gpus all --ulimit
memlock=-1 --ulimit stack=67108864`); `--init` reaps the servers' subprocesses and forwards SIGTERM; `--rm`
removes the container when it exits. Under pyxis a container is just processes in the job step (host
network, the step's GPUs, Slurm's limits), so only the image, mounts and working directory are rendered, with
srtctl's `--no-container-entrypoint --no-container-mount-home`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.render.sglang import model_path

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology
    from pdctl.topology.cluster import ContainerConfig

SQUASHFS_SUFFIXES = (".sqsh", ".squashfs")
# docker run options every engine container gets (see the module docstring)
DOCKER_BASE = ["--init", "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
RDMA_DEVICES = ["--device", "/dev/infiniband", "--cap-add", "IPC_LOCK"]
PYXIS_BASE = ["--no-container-entrypoint", "--no-container-mount-home"]


def is_squashfs(image: str) -> bool:
    """An enroot image file (pyxis runs it; docker cannot)."""
    return image.startswith(("/", "./", "../")) or image.endswith(SQUASHFS_SUFFIXES)


def _registry_split(image: str) -> tuple[str | None, str]:
    """'nvcr.io/nvidia/x:1' -> ('nvcr.io', 'nvidia/x:1'); 'lmsysorg/sglang:v1' -> (None, same): the first
    component is a registry when it has a dot or a port, or is localhost (docker's own rule)."""
    if "#" in image:  # already enroot's form
        registry, _, rest = image.partition("#")
        return registry, rest
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return None, image


def docker_image(image: str) -> str:
    """The image as docker names it (enroot's `registry#path` becomes `registry/path`)."""
    if is_squashfs(image):
        raise UserError(f"engine.container.image {image!r} is an enroot image file: docker (local and ssh nodes) "
                        "cannot run it; use a registry reference such as lmsysorg/sglang:v0.5.4, or Slurm")
    registry, rest = _registry_split(image)
    return f"{registry}/{rest}" if registry else rest


def pyxis_image(image: str) -> str:
    """The image as pyxis/enroot names it: a file path as is, a registry reference as `registry#path`."""
    if is_squashfs(image):
        return image
    registry, rest = _registry_split(image)
    return f"{registry}#{rest}" if registry else rest


def mounts(topo: Topology, container: ContainerConfig) -> list[str]:
    """SRC:DST[:flag] bind mounts: the topology's, then the local model directory at its own path, read-only
    (the servers are given that path), unless a mount already covers it."""
    out = list(container.mounts)
    model = model_path(topo)
    if model.startswith("/"):
        covered = any(model == dst or model.startswith(dst.rstrip("/") + "/")
                      for _, dst, _ in container.parsed_mounts())
        if not covered:
            out.append(f"{model}:{model}:ro")
    return out


def docker_prefix(topo: Topology, node: Node, *, name: str | None = None, interactive: bool = False) -> list[str]:
    """`docker run ... IMAGE`: what a command on a local or ssh node is put behind (the command follows).
    NAME names the container (launched servers, so `pdctl down` can remove one that outlives its docker
    client); INTERACTIVE keeps stdin open (preflight's transfer peers talk over it)."""
    container = topo.engine.container
    assert container is not None
    argv = ["docker", "run", "--rm"]
    if name:
        argv += ["--name", name]
    if interactive:
        argv.append("-i")
    argv += DOCKER_BASE
    if node.gpu != "cpu":
        argv += ["--gpus", "all"]
    if topo.is_pd and topo.transfer.protocol == "rdma":
        argv += RDMA_DEVICES
    for mount in mounts(topo, container):
        argv += ["-v", mount]
    for key, value in container.env.items():
        argv += ["-e", f"{key}={value}"]
    if container.workdir:
        argv += ["-w", container.workdir]
    argv += container.docker_args
    return [*argv, docker_image(container.image)]


def pyxis_container_name(topo: Topology) -> str:
    """The named pyxis container every step of the deployment runs in (one per node, for the job)."""
    return f"pdctl-{topo.name}"


def pyxis_options(topo: Topology) -> list[str]:
    """pyxis's srun options for engine.container (none without one); its env follows as `env K=V` inside.

    Every step names the same container (--container-name): pyxis imports the image on a node for the first
    step there and reuses that container for the later ones (preflight's probes, every server, the router),
    instead of pulling and unpacking a multi-GB image per step. A squashfs file (`image: /path/x.sqsh`, made
    once with `enroot import`) skips the registry altogether."""
    container = topo.engine.container
    if container is None:
        return []
    argv = [f"--container-image={pyxis_image(container.image)}", f"--container-name={pyxis_container_name(topo)}",
            *PYXIS_BASE]
    found = mounts(topo, container)
    if found:
        argv.append("--container-mounts=" + ",".join(found))
    if container.workdir:
        argv.append(f"--container-workdir={container.workdir}")
    return argv


def container_name(topo: Topology, process: str) -> str:
    """The docker container of a launched process: pdctl-<topology>-<process> (one per deployment)."""
    return f"pdctl-{topo.name}-{process}"
