"""Preflight at cluster scale: `pdctl preflight` over 2, 4, 8 and 16 network-namespace hosts (own address,
hostname, boot id and sshd each: tests/support/multihost.py), prefill on half of them and decode on the other
half, the reference engine, NIXL over TCP, with and without the transfer test; wall and CPU time as ratios vs
2 hosts, measured side by side in one run.

Targets (issue 30): with transfers, 8 hosts at most 4x and 16 hosts at most 6x the 2-host wall time (every
"host" shares this machine's cores, so this is what the CPU allows, not flatness). CPU: the pdctl process
and its ssh clients (RUSAGE_CHILDREN) plus everything the hosts' sshds ran for it (each sshd's reaped
children's user+sys time, read from /proc). Needs root (namespaces) and sshd. `python -m
benchmarks.bench_preflight [N ...]` or `make bench`; PDCTL_BENCH_ENV=<venv> runs another pdctl on the hosts
and as the controller (e.g. main's, for a before/after).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (2, 4, 8, 16)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
TARGETS = {8: 4.0, 16: 6.0}  # transfer wall, x the 2-host one


def _children_cpu(pid: int) -> float:
    """User + sys seconds of PID's children it has reaped (/proc/PID/stat cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _sessions_done(pids: list[int], timeout: float = 30) -> None:
    """Wait until the sshds have reaped every session (their CPU is then counted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(map(str, pids))], capture_output=True,
                              text=True, check=False).stdout.split()
        if not busy:
            return
        time.sleep(0.2)


def measure(python: str, topo: Path, cwd: Path, sshd_pids: list[int], *extra: str) -> tuple[float, float, dict]:
    """(wall s, CPU s, report) of one `pdctl preflight TOPO --json`."""
    out = cwd / "report.json"
    remote = sum(_children_cpu(p) for p in sshd_pids)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([python, "-m", "pdctl", "preflight", str(topo), "--json", str(out), *extra], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=1800)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _sessions_done(sshd_pids)
    remote = sum(_children_cpu(p) for p in sshd_pids) - remote
    local = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": done.stderr[-2000:]}
    return wall, local + remote, report


def one_size(n: int, tmp: Path, python: str, env: Path | None) -> dict[str, tuple[float, float, dict]]:
    from pdctl.reference.checkpoint import init_checkpoint
    from tests.support.multihost import scale_topology, start_multihost

    half = n // 2
    mh = start_multihost(tmp, LETTERS[:n])
    try:
        if env is not None:
            for letter in LETTERS[:n]:
                mh.use_env(letter, env)
        checkpoint = init_checkpoint(tmp / "models" / "reference-tiny", seed=0)
        topo = scale_topology(mh, tmp, checkpoint, prefill=LETTERS[:half], decode=LETTERS[half:n], name=f"bench{n}")
        pids = [s.proc.pid for s in mh.sshd.values()]
        return {"skip-transfer": measure(python, topo, tmp, pids, "--skip-transfer"),
                "transfer": measure(python, topo, tmp, pids)}
    finally:
        mh.stop()


def main() -> int:
    """Print wall and CPU per size and mode, as ratios vs 2 hosts, and the verdict on the targets."""
    from tests.support.netns import netns_missing_reason
    from tests.support.sshd import sshd_missing_reason

    why = netns_missing_reason() or sshd_missing_reason()
    if why:
        print(f"bench_preflight needs namespaced hosts with sshd: {why}")
        return 1
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or list(SIZES)
    env = Path(os.environ["PDCTL_BENCH_ENV"]) if os.environ.get("PDCTL_BENCH_ENV") else None
    python = str(env / "bin" / "python") if env else sys.executable
    results: dict[int, dict[str, tuple[float, float, dict]]] = {}
    print(f"{'hosts':>5s} {'mode':14s} {'wall s':>8s} {'x wall':>7s} {'cpu s':>8s} {'x cpu':>7s} {'pairs':>5s} "
          f"{'rounds':>6s} {'agents':>6s} ok", flush=True)
    failed = False
    for n in sizes:  # each size's rows as soon as it is measured (16 hosts before issue 30 took minutes)
        with tempfile.TemporaryDirectory(prefix=f"pdctl-bench-pf{n}-") as tmp:
            results[n] = one_size(n, Path(tmp), python, env)
        base = results[sizes[0]]
        for mode, (wall, cpu, doc) in results[n].items():
            plan = doc.get("transfer_plan") or {}
            print(f"{n:5d} {mode:14s} {wall:8.2f} {wall / base[mode][0]:7.2f} {cpu:8.2f} {cpu / base[mode][1]:7.2f} "
                  f"{len(doc.get('transfers', [])):5d} {len(plan.get('rounds', [])):6d} "
                  f"{len(doc.get('agents') or {}):6d} {doc.get('ok')}", flush=True)
            failed |= not doc.get("ok")
    base = results[sizes[0]]
    for n, target in TARGETS.items():
        if n in results and sizes[0] == 2:
            ratio = results[n]["transfer"][0] / base["transfer"][0]
            print(f"{n} hosts with transfers: {ratio:.2f}x the 2-host wall ({'within' if ratio <= target else 'OVER'} "
                  f"the {target:g}x target)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
