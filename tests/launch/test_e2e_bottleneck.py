"""The bottleneck verdict and GPU telemetry live on CPU: the local CPU deployment (configs/local-cpu.yaml:
reference prefill TP2 -> decode TP1 over NIXL, the real sglang-router) launched three ways, loaded with SGLang's
real serving benchmark (`pdctl bench serve`), and watched with `pdctl status --watch --json -` meanwhile:

- as shipped: idle, then lightly loaded (one request at a time) -> no bottleneck (idle, then none), and the
  watch says no GPUs were seen (CPU nodes);
- decode with a tiny KV pool under load -> kv-bound (decode), in --watch and in bench serve's level;
- the router limited to 2 requests in flight (--max-concurrent-requests) under concurrency 8 -> queue-bound
  (sglang-router 0.3.2 answers the requests over its limit 408 after about half a second: that run fails);
- the KV crossing a 2 Mbit/s link between namespaced hosts -> transfer-bound.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.launch_e2e import detached_run, pdctl
from tests.support.launch_samples import local_cpu
from tests.support.net import wait_for

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("bottleneck-healthy")
    with detached_run(tmp, local_cpu(tmp, ref_checkpoint, name="bn-healthy")) as dep:
        yield dep


class Watch:
    """`pdctl status --watch --json -` in the background: one JSON document per refresh, read as they come (a
    reader thread: an unread pipe would stall the watch); Ctrl-C ends it."""

    def __init__(self, dep: dict) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pdctl", "status", "--watch", "--interval", "1", "--run-dir", str(dep["run_dir"]),
             "--json", "-"], cwd=dep["tmp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.docs: list[dict] = []
        self.text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.docs.append(json.loads(line))

    def refreshes(self, n: int, timeout: float = 120) -> list[dict]:
        """Wait until N refreshes were seen (the watch's own interval paces them); those N."""
        wait_for(lambda: len(self.docs) >= n or self.proc.poll() is not None, timeout=timeout,
                 what=f"{n} --watch refreshes")
        assert len(self.docs) >= n, self.stop()
        return self.docs[:n]

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self._reader.join(timeout=30)
        self.text = err
        return err


def _bench(dep: dict, python: str, *args: str, exit_code: int = 0) -> dict:
    out = dep["tmp"] / f"bench-{abs(hash(args))}.json"
    done = pdctl("bench", "serve", "--run-dir", str(dep["run_dir"]), "--tool-python", python, "--warmup", "1",
                 *args, "--json", str(out), cwd=dep["tmp"], timeout=600)
    assert done.returncode == exit_code, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert "bottleneck" in done.stdout
    return doc


def _verdicts(docs: list[dict]) -> list[str]:
    return [d["bottleneck"]["verdict"] for d in docs]


def test_a_healthy_deployment_idle_and_lightly_loaded_has_no_bottleneck(healthy: dict, sglang_python: str) -> None:
    watch = Watch(healthy)
    try:
        idle = watch.refreshes(4)
        assert _verdicts(idle)[2:] == ["idle", "idle"], [d["bottleneck"] for d in idle]
        gpus = idle[-1]["gpus"]
        assert gpus["local"]["source"] is None and "CPU node" in gpus["local"]["why"]
        doc = _bench(healthy, sglang_python, "--concurrency", "1", "--isl", "32", "--osl", "32", "--num-prompts",
                     "12")
        (level,) = doc["points"]
        assert level["bottleneck"]["verdict"] in ("none", "idle", "not enough data"), level["bottleneck"]
        assert level["bottleneck"]["verdict"] == "none", level["bottleneck"]  # it ran long enough to be judged
    finally:
        text = watch.stop()
    assert not any(v.endswith("-bound") for v in _verdicts(watch.docs)), [d["bottleneck"] for d in watch.docs]
    # the human view of the same watch: the verdict with its evidence, and that no GPU was seen
    assert "bottleneck: " in text and "No GPUs were seen on any node" in text and "CPU node (gpu: cpu)" in text


@pytest.fixture(scope="module")
def tiny_kv(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("bottleneck-kv")
    topo = local_cpu(tmp, ref_checkpoint, name="bn-tiny-kv", decode={"max_total_tokens": 512})
    with detached_run(tmp, topo) as dep:
        yield dep


def _watched_bench(dep: dict, python: str, *args: str, exit_code: int = 0) -> tuple[dict, list[dict]]:
    """One bench serve level (ARGS) with `status --watch` running: the level's document and the watch's."""
    watch = Watch(dep)
    try:
        watch.refreshes(1)
        doc = _bench(dep, python, *args, exit_code=exit_code)
    finally:
        watch.stop()
    (level,) = doc["points"]
    return level, watch.docs


def test_decode_with_a_tiny_kv_pool_under_load_is_kv_bound(tiny_kv: dict, sglang_python: str) -> None:
    level, docs = _watched_bench(tiny_kv, sglang_python, "--concurrency", "8", "--isl", "64", "--osl", "96",
                                 "--num-prompts", "24")
    assert (level["bottleneck"]["verdict"], level["bottleneck"]["role"]) == ("kv-bound", "decode"), level["bottleneck"]
    assert "KV pool" in level["bottleneck"]["evidence"][0]
    seen = [d["bottleneck"] for d in docs if d["bottleneck"]["verdict"] == "kv-bound"]
    assert seen and seen[0]["role"] == "decode" and seen[0]["evidence"], _verdicts(docs)


@pytest.fixture(scope="module")
def router_limited(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("bottleneck-router")
    topo = local_cpu(tmp, ref_checkpoint, name="bn-router",
                     router={"args": {"max-concurrent-requests": 2}})
    with detached_run(tmp, topo) as dep:
        yield dep


def test_concurrency_above_the_routers_limit_is_queue_bound(router_limited: dict, sglang_python: str) -> None:
    level, docs = _watched_bench(router_limited, sglang_python, "--concurrency", "8", "--isl", "32", "--osl", "64",
                                 "--num-prompts", "24", exit_code=1)  # the requests the router refused failed
    assert level["errors"] > 0 and "turned" in level["bottleneck"]["evidence"][0]
    assert (level["bottleneck"]["verdict"], level["bottleneck"]["role"]) == ("queue-bound", "router"), \
        level["bottleneck"]
    assert any(d["bottleneck"]["verdict"] == "queue-bound" for d in docs), _verdicts(docs)


@pytest.fixture(scope="module")
def slow_link(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    """The PD topology across namespaced hosts (prefill on a, decode on b, router on c: tests/support/multihost.py),
    prefill's host sending at 2 Mbit/s (a token-bucket qdisc on its interface; this kernel has no netem): the KV
    crosses a slow link, nothing else is slow."""
    from tests.support.multihost import pd_topology, start_multihost

    tmp = tmp_path_factory.mktemp("bottleneck-slow-link")
    mh = start_multihost(tmp)
    try:
        topo = pd_topology(mh, tmp, ref_checkpoint, backend="nixl", name="bn-slow-link")
        with detached_run(tmp, topo, "--skip-compat") as dep:
            mh["a"].run(["tc", "qdisc", "add", "dev", "pd0", "root", "tbf", "rate", "2mbit", "burst", "32kbit",
                         "latency", "2000ms"])
            yield dep
    finally:
        mh.stop()


def test_a_slow_transfer_path_is_transfer_bound(slow_link: dict, sglang_python: str) -> None:
    doc = _bench(slow_link, sglang_python, "--concurrency", "2", "--isl", "192", "--osl", "4", "--num-prompts", "8")
    (level,) = doc["points"]
    assert (level["bottleneck"]["verdict"], level["bottleneck"]["role"]) == ("transfer-bound", "prefill"), \
        level["bottleneck"]
    assert "of decode's TTFT" in level["bottleneck"]["evidence"][0]
