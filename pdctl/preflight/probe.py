"""The node probe: one stdlib-only Python program that preflight runs on every node, with the engine's own
interpreter, through the node's executor (`python -c <this file> <args json>`).

Why one program with the engine's Python: a single round trip per node (ssh, srun), and the facts come from
the interpreter that will actually run the servers (its version, the packages it imports, what it can bind
and read). It must run where pdctl is not installed (an SGLang node), so it imports nothing but the standard
library and never pdctl. It only gathers: raw tool outputs (nvidia-smi -q, ucx_info -d, ip, sysfs) are
returned as text and parsed on the controlling side (pdctl.preflight.parsers), so parsing is tested on
captured outputs. Output: one line `@@probe <json>` on stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys

MARKER = "@@probe "
IB_ROOT = "/sys/class/infiniband"
IMEX_DIR = "/dev/nvidia-caps-imex-channels"
PCI_ROOT = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA / 3D controller
# the fact key -> distribution names (first one installed wins); the transfer backends' come with the arguments
# (pdctl.transfer.registry: the probe runs alone on the node, with nothing of pdctl to import)
PACKAGES = {
    "sglang": ("sglang",),
    "torch": ("torch",),
    "sglang_router": ("sglang-router",),
}
CONFIG_MAX_BYTES = 4 << 20


def package_versions(more: dict | None = None) -> dict:
    """Installed versions (importlib.metadata: no import of heavy packages) of PACKAGES and MORE (key ->
    distribution names), and pdctl's by importing it (what a reference-engine server would run)."""
    from importlib import metadata

    out: dict = {}
    for key, names in {**PACKAGES, **(more or {})}.items():
        out[key] = None
        for name in names:
            try:
                out[key] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    try:
        import pdctl

        out["pdctl"] = getattr(pdctl, "__version__", "unknown")
    except Exception:  # noqa: BLE001 - not installed, or broken: both mean "no usable pdctl"
        out["pdctl"] = None
    return out


def run(argv: list, timeout: float) -> dict | None:
    """ARGV's {rc, out, err}, None when the program is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, errors="replace", check=False)
    except subprocess.TimeoutExpired:
        return {"rc": None, "out": "", "err": f"timed out after {timeout}s"}
    except OSError as exc:
        return {"rc": 127, "out": "", "err": str(exc)}
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr[-2000:]}


def dump_sysfs(root: str = IB_ROOT) -> str:
    """`<device>/[ports/<n>/]<file>:<value>` lines for the files of ROOT preflight reads (parsers.ib_sysfs)."""
    lines = []
    if not os.path.isdir(root):
        return ""
    for dev in sorted(os.listdir(root)):
        base = os.path.join(root, dev)
        for name in ("hca_type", "fw_ver"):
            value = _read(os.path.join(base, name))
            if value is not None:
                lines.append(f"{dev}/{name}:{value}")
        ports = os.path.join(base, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            for name in ("state", "phys_state", "link_layer", "rate"):
                value = _read(os.path.join(ports, port, name))
                if value is not None:
                    lines.append(f"{dev}/ports/{port}/{name}:{value}")
    return "\n".join(lines) + ("\n" if lines else "")


def dump_pci(ib_root: str = IB_ROOT, pci_root: str = PCI_ROOT) -> str:
    """Where each HCA and each NVIDIA GPU sits in the PCIe tree: `ib <device> <sysfs device path> <netdevs>`
    and `gpu <bdf> <sysfs device path>` lines (realpaths under /sys/devices; parsers.pci_topology)."""
    lines = []
    for dev in sorted(os.listdir(ib_root)) if os.path.isdir(ib_root) else []:
        link = os.path.join(ib_root, dev, "device")
        path = os.path.realpath(link) if os.path.exists(link) else "-"
        net = os.path.join(link, "net")
        nets = sorted(os.listdir(net)) if os.path.isdir(net) else []
        lines.append(f"ib {dev} {path} {','.join(nets) or '-'}")
    for bdf in sorted(os.listdir(pci_root)) if os.path.isdir(pci_root) else []:
        base = os.path.join(pci_root, bdf)
        if _read(os.path.join(base, "vendor")) == NVIDIA_VENDOR and (_read(os.path.join(base, "class")) or "").startswith(
                GPU_CLASSES):
            lines.append(f"gpu {bdf} {os.path.realpath(base)}")
    return "\n".join(lines) + ("\n" if lines else "")


def gdr_facts(proc_modules: str = "/proc/modules", sys_module: str = "/sys/module",
              nvidia_version: str = "/proc/driver/nvidia/version") -> dict:
    """What GPU memory registration for RDMA needs: nvidia_peermem loaded, or DMA-BUF (the open NVIDIA kernel
    module on Linux >= 5.12): the loaded modules, the driver's version line, the kernel release."""
    modules = [line.split()[0] for line in (_read(proc_modules) or "").splitlines() if line.strip()]
    version = (_read(nvidia_version) or "").splitlines()
    return {
        "peermem": any(m in ("nvidia_peermem", "nv_peer_mem") for m in modules)
        or os.path.isdir(os.path.join(sys_module, "nvidia_peermem")),
        "modules": sorted(m for m in modules if m.startswith(("nvidia", "nv_peer", "mlx5", "ib_core"))),
        "nvidia_version": version[0].strip() if version else None,
        "kernel": platform.release(),
    }


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def read_files(paths: list) -> dict:
    """The first bytes of each file, or why it cannot be read (is a directory shared with the launcher?)."""
    out = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                out[path] = {"text": fh.read(256).strip()}
        except OSError as exc:
            out[path] = {"error": f"{type(exc).__name__}: {exc.strerror or exc}"}
    return out


def resolve(names: list) -> dict:
    """Each name -> its addresses as this node resolves them, or {'error': ...}."""
    out = {}
    for name in names:
        try:
            infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
            out[name] = sorted({info[4][0] for info in infos})
        except OSError as exc:
            out[name] = {"error": str(exc)}
    return out


def route(address: str, timeout: float) -> dict | None:
    """`ip -o route get` for ADDRESS (a name is resolved first: ip wants an address)."""
    target = address
    try:
        target = socket.getaddrinfo(address, None, 0, socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:
        return {"rc": 2, "out": "", "err": f"cannot resolve {address}: {exc}"}
    return run(["ip", "-o", "route", "get", target], timeout)


def port_state(host: str, port: int) -> str:
    """'free', 'in use', or why it cannot be bound (e.g. the address is not on this node)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except OSError as exc:
            return "in use" if exc.errno == 98 else f"cannot bind: {exc.strerror or exc}"
    return "free"


def model_facts(path: str | None) -> dict | None:
    """Whether the model directory exists here, its config.json (parsed) and the config's sha256."""
    if not path:
        return None
    facts: dict = {"path": path, "exists": os.path.isdir(path)}
    config = os.path.join(path, "config.json")
    if facts["exists"] and os.path.isfile(config) and os.path.getsize(config) <= CONFIG_MAX_BYTES:
        with open(config, "rb") as fh:
            raw = fh.read()
        facts["config_sha256"] = hashlib.sha256(raw).hexdigest()
        try:
            facts["config"] = json.loads(raw)
        except ValueError as exc:
            facts["config_error"] = str(exc)
    if facts["exists"]:
        facts["files"] = sorted(os.listdir(path))[:50]
    return facts


def hf_snapshot(repo_id: str, revision: str | None) -> str | None:
    """The local snapshot directory of an HF repo in this node's HF cache (as huggingface_hub finds it)."""
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if not hub:
        home = os.environ.get("HF_HOME")
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        hub = os.path.join(home, "hub") if home else os.path.join(base, "huggingface", "hub")
    repo = os.path.join(os.path.expanduser(hub), "models--" + repo_id.replace("/", "--"))
    ref = _read(os.path.join(repo, "refs", revision or "main"))
    candidates = [ref or revision or ""] + (sorted(os.listdir(os.path.join(repo, "snapshots")))
                                           if os.path.isdir(os.path.join(repo, "snapshots")) else [])
    for snap in candidates:
        path = os.path.join(repo, "snapshots", snap)
        if snap and os.path.isfile(os.path.join(path, "config.json")):
            return path
    return None


def disk_free(paths: list) -> dict:
    """Free bytes of the filesystem holding each path (its nearest existing parent)."""
    out = {}
    for path in paths:
        probe = path
        while probe and not os.path.exists(probe):
            probe = os.path.dirname(probe)
        try:
            out[path] = shutil.disk_usage(probe or "/").free
        except OSError as exc:
            out[path] = {"error": str(exc)}
    return out


def meminfo() -> dict:
    out = {}
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            out[key] = int(rest.split()[0]) * 1024
    return out


def main(args: dict) -> dict:
    timeout = float(args.get("command_timeout", 20))
    facts: dict = {
        "hostname": socket.gethostname(),
        "python": {"executable": sys.executable, "version": platform.python_version(),
                   "machine": platform.machine()},
        "packages": package_versions(args.get("packages")),
        "ip_addr": run(["ip", "-o", "addr", "show"], timeout),
        "resolve": resolve(args.get("resolve", [])),
        "routes": {a: route(a, timeout) for a in args.get("routes", [])},
        "ports": [[h, p, port_state(h, p)] for h, p in args.get("ports", [])],
        "model": model_facts(args.get("model") or (
            hf_snapshot(args["model_repo"], args.get("revision")) if args.get("model_repo") else None)),
        "model_repo": args.get("model_repo"),
        "disk_free": disk_free(args.get("disk", [])),
        "memory": meminfo(),
        "nvidia_smi": run(["nvidia-smi", "-q"], timeout) if args.get("gpu", True) else None,
        "ucx_info": run(["ucx_info", "-d"], timeout) if args.get("ucx", False) else None,
        "ib_sysfs": dump_sysfs(),
        "imex_channels": sorted(os.listdir(IMEX_DIR)) if os.path.isdir(IMEX_DIR) else None,
        "pci": dump_pci(),
        "gdr": gdr_facts(),
        "ucx_env": {k: os.environ.get(k) for k in ("UCX_NET_DEVICES", "UCX_TLS")},
        "read_files": read_files(args.get("read_files", [])),
        "dirs": {path: os.path.isdir(path) for path in args.get("dirs", [])},
    }
    return facts


if __name__ == "__main__":
    print(MARKER + json.dumps(main(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})), flush=True)
