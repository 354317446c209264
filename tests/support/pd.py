"""Start a real PD deployment in tests: prefill + decode reference servers behind the REAL sglang-router.

    with start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl") as pd:
        requests.post(pd.router_url + "/generate", json={...})

Every process runs in its own process group and is killed on exit; every wait has a timeout and a failed
start raises with the log tails. No port races: reference servers bind port 0 and report theirs
(tests/support/servers.py); the router's ports are reserved for this process (tests/support/net.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port, wait_http_ok
from tests.support.servers import RunningServer, kill_group, log_tail, spawn_reference


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

    def log_tails(self, n: int = 30) -> str:
        """Last lines of every log, for assertion messages."""
        logs = {"prefill": self.prefill.log_path, "decode": self.decode.log_path, "router": self.router_log}
        return "\n".join(f"--- {name} ---\n{log_tail(path, n)}" for name, path in logs.items())


def router_command(
    prefill_url: str, bootstrap_port: int | None, decode_url: str | None, port: int, prom_port: int
) -> list[str]:
    """The argv of the real sglang-router (the same shape `pdctl launch` renders): PD mode for a prefill and a
    decode; regular mode (`--worker-urls`, as for a `mode: colocated` topology) when only PREFILL_URL is given,
    a plain server."""
    if decode_url is None:
        workers = ["--worker-urls", prefill_url]
    else:
        workers = ["--pd-disaggregation", "--prefill", prefill_url, str(bootstrap_port), "--decode", decode_url]
    return [
        sys.executable,
        "-m",
        "sglang_router.launch_router",
        *workers,
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
    specs: Sequence[tuple],
    *,
    timeout: float = 120.0,
    log_dir: str | Path | None = None,
) -> Iterator[list[RunningServer]]:
    """Start several reference servers AT ONCE ((role, tp, extra_args[, env[, python]]) each), wait until all are
    healthy. Starting them in parallel roughly halves a PD test's start-up time on a small machine.
    """
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    servers: list[RunningServer] = []
    try:
        for role, tp, extra, *more in specs:
            env, python = (*more, None, None)[:2]
            servers.append(spawn_reference(checkpoint, role=role, tp=tp, extra_args=extra, log_dir=log_dir,
                                           env=env, python=python))
        for srv in servers:
            srv.wait_healthy(timeout)
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
def start_routers(
    pairs: Sequence[tuple[str, int | None, str | None]],
    *,
    timeout: float = 120.0,
    log_dir: str | Path | None = None,
) -> Iterator[list[tuple[str, subprocess.Popen, Path]]]:
    """The real sglang-router in PD mode for each (prefill URL, bootstrap port, decode URL) — in regular mode for
    (server URL, None, None) — all started at once and then each waited on until it answers /health; yields
    [(url, process, log path)] in PAIRS' order. Torn down together (in parallel).

    The router cannot report a port it picked itself: its ports are reserved for this test process
    (tests/support/net.py::free_port), so no other process can take them before it binds."""
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    routers: list[tuple[str, subprocess.Popen, Path]] = []
    try:
        for prefill_url, bootstrap_port, decode_url in pairs:
            port, prom = free_port(), free_port()
            log_path = log_dir / f"router-{port}.log"
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    router_command(prefill_url, bootstrap_port, decode_url, port, prom),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            routers.append((f"http://127.0.0.1:{port}", proc, log_path))
        for url, proc, log_path in routers:
            try:
                wait_http_ok(f"{url}/health", timeout=timeout, proc=proc)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(
                    f"sglang-router did not start: {exc}\n--- router log ---\n{log_tail(log_path, 30)}"
                ) from exc
        yield routers
    finally:
        terminate_all([proc for _, proc, _ in routers])


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
    with start_routers([(prefill_url, bootstrap_port, decode_url)], timeout=timeout, log_dir=log_dir) as routers:
        yield routers[0]


def pd_args(backend: str, page_size: int) -> list[str]:
    """The PD flags both roles get (the prefill's bootstrap port is 0: it reports the one it bound)."""
    return ["--page-size", str(page_size), "--disaggregation-transfer-backend", backend]


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
    common = pd_args(backend, page_size)
    specs = [
        ("prefill", prefill_tp, [*common, *prefill_args]),
        ("decode", decode_tp, [*common, *decode_args]),
    ]
    with start_servers(checkpoint, specs, timeout=timeout, log_dir=log_dir) as servers:
        prefill, decode = servers
        bootstrap_port = int(prefill.bootstrap_port)
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
    try:
        wait_http_ok(
            router_url + "/generate",
            timeout,
            proc,
            post_json={"text": "ready?", "sampling_params": {"max_new_tokens": 1, "temperature": 0}},
            request_timeout=30,
            interval=0.3,
        )
    except (RuntimeError, TimeoutError) as exc:
        raise type(exc)(f"no PD request succeeded through the router: {exc}") from exc


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
    common = pd_args(backend, page_size)
    specs = [("prefill", prefill_tp, [*common, *prefill_args])]
    specs += [("decode", tp, [*common, *extra]) for tp, extra in decodes.values()]
    with ExitStack() as stack:
        servers = stack.enter_context(start_servers(checkpoint, specs, timeout=timeout, log_dir=log_dir))
        boot = int(servers[0].bootstrap_port)
        out: dict[str, str] = {"boot": str(boot), "prefill": servers[0].url}
        routers = stack.enter_context(start_routers(  # all at once; they stop in parallel, first at teardown
            [(servers[0].url, boot, srv.url) for srv in servers[1:]], timeout=timeout, log_dir=log_dir))
        procs = []
        for name, srv, (url, proc, _) in zip(decodes, servers[1:], routers):
            out[name], out[f"{name}:server"] = url, srv.url
            procs.append(proc)
        for name, proc in zip(decodes, procs):
            if name in routable:
                wait_routable(out[name], timeout, proc)
        yield out


@dataclass(frozen=True)
class PairSpec:
    """One PD pair of `start_pd_pairs`: TP sizes, backend, and extra flags for both roles or each role."""

    prefill_tp: int
    decode_tp: int
    backend: str = "nixl"
    both_args: tuple[str, ...] = ()
    prefill_args: tuple[str, ...] = ()
    decode_args: tuple[str, ...] = ()
    page_size: int = 16
    sglang_python: str | None = None  # run both servers on SGLang's transfer stack, in this interpreter
    decode_env: dict[str, str] | None = None  # e.g. the test hook's PDCTL_ENABLE_TEST_HOOKS=1


@contextmanager
def start_pd_pairs(
    checkpoint: str | Path, pairs: dict[str, PairSpec], *, timeout: float = 240.0, log_dir: str | Path | None = None
) -> Iterator[dict[str, PDDeployment]]:
    """Several PD deployments (name -> PairSpec), every server started at once, each pair behind its own real
    router; yields {name: PDDeployment} once a PD request went through each. Everything is torn down after."""
    with start_pd_pairs_and_servers(checkpoint, pairs, timeout=timeout, log_dir=log_dir) as (deployments, _):
        yield deployments


@contextmanager
def start_pd_pairs_and_servers(
    checkpoint: str | Path,
    pairs: dict[str, PairSpec],
    also: Sequence[tuple] = (),
    *,
    timeout: float = 240.0,
    log_dir: str | Path | None = None,
) -> Iterator[tuple[dict[str, PDDeployment], list[RunningServer]]]:
    """start_pd_pairs, with ALSO's servers (start_servers' specs: colocated references, controls) started in
    the same batch, so that no start-up waits for another; yields ({name: PDDeployment}, ALSO's servers)."""
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-pd-"))
    specs = []
    for spec in pairs.values():
        common = [*pd_args(spec.backend, spec.page_size), *spec.both_args]
        if spec.sglang_python:
            common += ["--transfer-stack", "sglang"]
        specs += [("prefill", spec.prefill_tp, [*common, *spec.prefill_args], None, spec.sglang_python),
                  ("decode", spec.decode_tp, [*common, *spec.decode_args], spec.decode_env, spec.sglang_python)]
    with ExitStack() as stack:
        servers = stack.enter_context(start_servers(checkpoint, [*specs, *also], timeout=timeout, log_dir=log_dir))
        # every router at once; they stop in parallel, first at teardown
        routers = stack.enter_context(start_routers(
            [(servers[2 * i].url, int(servers[2 * i].bootstrap_port), servers[2 * i + 1].url)
             for i in range(len(pairs))], timeout=timeout, log_dir=log_dir))
        out: dict[str, PDDeployment] = {}
        for i, (name, (url, proc, router_log)) in enumerate(zip(pairs, routers)):
            prefill, decode = servers[2 * i], servers[2 * i + 1]
            out[name] = PDDeployment(url, prefill.url, decode.url, int(prefill.bootstrap_port), prefill, decode,
                                     proc, router_log)
        for dep in out.values():
            try:
                wait_routable(dep.router_url, timeout, dep.router_proc)
            except (RuntimeError, TimeoutError) as exc:
                raise RuntimeError(f"PD deployment not ready: {exc}\n{dep.log_tails()}") from exc
        yield out, servers[len(specs):]
