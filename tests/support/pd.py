"""Start a real PD deployment in tests: prefill + decode reference servers behind the REAL sglang-router.

    with start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl") as pd:
        requests.post(pd.router_url + "/generate", json={...})

Every process runs in its own process group and is killed on exit; ports come from free_port(); every wait
has a timeout and a failed start raises with the log tails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.support.net import free_port, wait_http_ok
from tests.support.servers import REPO_ROOT, RunningServer, kill_group, reference_command


@dataclass
class PDDeployment:
    """A running prefill/decode/router trio."""

    router_url: str
    prefill_url: str
    decode_url: str
    bootstrap_port: int
    prefill: RunningServer
    decode: RunningServer
    router_proc: subprocess.Popen
    router_log: Path
    logs: dict[str, Path] = field(default_factory=dict)

    def log_tails(self, n: int = 30) -> str:
        """Last lines of every log, for assertion messages."""
        out = []
        for name, path in {
            "prefill": self.prefill.log_path,
            "decode": self.decode.log_path,
            "router": self.router_log,
        }.items():
            try:
                lines = path.read_text(errors="replace").splitlines()[-n:]
            except OSError:
                lines = []
            out.append(f"--- {name} ---\n" + "\n".join(lines))
        return "\n".join(out)


def router_command(
    prefill_url: str, bootstrap_port: int, decode_url: str, port: int, prom_port: int
) -> list[str]:
    """The argv of the real sglang-router in PD mode (the same shape `pdctl launch` renders)."""
    return [
        sys.executable,
        "-m",
        "sglang_router.launch_router",
        "--pd-disaggregation",
        "--prefill",
        prefill_url,
        str(bootstrap_port),
        "--decode",
        decode_url,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--prometheus-port",
        str(prom_port),
        "--shutdown-grace-period-secs",
        "1",
        "--worker-startup-check-interval",
        "1",
        "--log-level",
        "warn",
    ]


@contextmanager
def start_servers(
    checkpoint: str | Path,
    specs: Sequence[tuple[str, int, Sequence[str]]],
    *,
    timeout: float = 120.0,
    log_dir: str | Path | None = None,
) -> Iterator[list[RunningServer]]:
    """Start several reference servers AT ONCE ((role, tp, extra_args) each), wait until all are healthy.

    Starting them in parallel roughly halves a PD test's start-up time on a small machine.
    """
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    servers: list[RunningServer] = []
    try:
        for role, tp, extra in specs:
            port = free_port()
            log_path = log_dir / f"reference-{role}-{port}.log"
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    reference_command(checkpoint, role=role, tp=tp, port=port, extra_args=list(extra)),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=str(REPO_ROOT),
                    start_new_session=True,
                )
            servers.append(RunningServer(f"http://127.0.0.1:{port}", port, proc, log_path))
        for srv in servers:
            try:
                wait_http_ok(srv.url + "/health", timeout=timeout, proc=srv.proc)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(
                    f"reference server did not start: {exc}\n--- log ---\n{srv.log_tail()}"
                ) from exc
        yield servers
    finally:
        terminate_all([srv.proc for srv in servers])


def terminate_all(procs: Sequence[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGTERM every process group at once, then wait for (or SIGKILL) each: teardown in parallel."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for proc in procs:
        kill_group(proc, timeout)


@contextmanager
def start_router(
    prefill_url: str,
    bootstrap_port: int,
    decode_url: str,
    *,
    timeout: float = 120.0,
    log_dir: str | Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """The real sglang-router in PD mode for one prefill/decode pair; yields (url, process, log path)."""
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    port, prom = free_port(), free_port()
    log_path = log_dir / f"router-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            router_command(prefill_url, bootstrap_port, decode_url, port, prom),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/health", timeout=timeout, proc=proc)
        yield f"http://127.0.0.1:{port}", proc, log_path
    finally:
        kill_group(proc)


def pd_args(backend: str, page_size: int, bootstrap_port: int) -> list[str]:
    """The PD flags both roles get."""
    return [
        "--page-size",
        str(page_size),
        "--disaggregation-transfer-backend",
        backend,
        "--disaggregation-bootstrap-port",
        str(bootstrap_port),
    ]


@contextmanager
def start_pd(
    checkpoint: str | Path,
    *,
    prefill_tp: int = 2,
    decode_tp: int = 1,
    backend: str = "nixl",
    page_size: int = 16,
    prefill_args: Sequence[str] = (),
    decode_args: Sequence[str] = (),
    timeout: float = 120.0,
    log_dir: str | Path | None = None,
) -> Iterator[PDDeployment]:
    """Prefill + decode reference servers and the real router; yields once a PD request went through."""
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    bootstrap_port = free_port()
    common = pd_args(backend, page_size, bootstrap_port)
    specs = [
        ("prefill", prefill_tp, [*common, *prefill_args]),
        ("decode", decode_tp, [*common, *decode_args]),
    ]
    with start_servers(checkpoint, specs, timeout=timeout, log_dir=log_dir) as servers:
        prefill, decode = servers
        with start_router(
            prefill.url, bootstrap_port, decode.url, timeout=timeout, log_dir=log_dir
        ) as router:
            url, proc, router_log = router
            dep = PDDeployment(
                url, prefill.url, decode.url, bootstrap_port, prefill, decode, proc, router_log
            )
            try:
                wait_routable(dep.router_url, timeout, proc)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(f"PD deployment not ready: {exc}\n{dep.log_tails()}") from exc
            yield dep


def wait_routable(router_url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """The router answers /health before it has registered its workers: wait for one real PD request."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"router exited with {proc.returncode}")
        try:
            r = requests.post(
                router_url + "/generate",
                timeout=30,
                json={"text": "ready?", "sampling_params": {"max_new_tokens": 1, "temperature": 0}},
            )
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}: {r.text[:200]}"
        except requests.RequestException as exc:
            last = str(exc)
        time.sleep(0.3)
    raise TimeoutError(f"no PD request succeeded through the router within {timeout}s: {last}")


@contextmanager
def start_shared_prefill(
    checkpoint: str | Path,
    prefill_tp: int,
    decodes: dict[str, tuple[int, Sequence[str]]],
    routable: set[str],
    log_dir: str | Path | None = None,
    *,
    backend: str = "nixl",
    page_size: int = 16,
    prefill_args: Sequence[str] = (),
    timeout: float = 120.0,
) -> Iterator[dict[str, str]]:
    """One prefill serving several decodes (name -> (tp, extra args)), each behind its own real router.

    Cheaper than one `start_pd` per pairing: the prefill accepts every decode that registers. Yields
    {name: router URL, f"{name}:server": decode URL, "boot": bootstrap port, "prefill": prefill URL}; routers of names in ROUTABLE are
    waited on until a PD request succeeds (a decode the handshake rejects never becomes routable).
    """
    boot = free_port()
    common = pd_args(backend, page_size, boot)
    specs = [("prefill", prefill_tp, [*common, *prefill_args])]
    specs += [("decode", tp, [*common, *extra]) for tp, extra in decodes.values()]
    with ExitStack() as stack:
        servers = stack.enter_context(start_servers(checkpoint, specs, timeout=timeout, log_dir=log_dir))
        out: dict[str, str] = {"boot": str(boot), "prefill": servers[0].url}
        procs = []
        for name, srv in zip(decodes, servers[1:]):
            url, proc, _ = stack.enter_context(
                start_router(servers[0].url, boot, srv.url, timeout=timeout, log_dir=log_dir)
            )
            out[name], out[f"{name}:server"] = url, srv.url
            procs.append(proc)
        stack.callback(terminate_all, procs)  # runs first at teardown: routers stop in parallel
        for name, proc in zip(decodes, procs):
            if name in routable:
                wait_routable(out[name], timeout, proc)
        yield out
