"""Root fixtures and the run's policy.

- `ref_checkpoint`: a deterministic reference checkpoint created once per session (no downloads in tests).
- `chromium`: headless Chromium, or a skip BEFORE anything is launched when it is not installed.
- `sglang_python`: the SGLang side environment's interpreter (`make sglang-env`), or a skip saying so;
  `sglang_stack_python`: the same, when it has the transfer libraries SGLang's stack needs.
- Strict mode (`PDCTL_STRICT_TESTS=1`, set by .ci/run): a skipped test fails the run. In CI every part
  is installed, so a skip can only hide breakage; the run lists the skips and exits non-zero.
- Workers (`make test` runs pytest-xdist with `-n 2 --dist loadgroup`): a module's tests stay together on one
  worker (its module-scoped deployment starts once), and the modules in GROUPS["cpu-heavy"] (real SGLang servers,
  whose schedulers busy-poll, and the parity fleet) form one group that runs first, on one worker, one module
  after another, while the other worker takes the rest, most of which waits on servers rather than computes;
  GROUPS["hosts"] keeps the modules that build Slurm clusters or namespaced hosts one after another too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

STRICT_ENV = "PDCTL_STRICT_TESTS"
# The CLI's tables are as wide as COLUMNS says, or 160 columns when the output is no terminal (pdctl/cli/console.py).
# pytest-xdist's workers run with COLUMNS=80 set: the tests' commands (in process and their subprocesses) get the
# environment of a plain `pytest` run, whatever runs them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture(scope="session")
def ref_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default reference-engine checkpoint (seed 0), created on the fly — no downloads in tests."""
    from pdctl.reference.checkpoint import init_checkpoint

    return init_checkpoint(tmp_path_factory.mktemp("ckpt") / "reference-tiny", seed=0)


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium (tests/support/chromium.py); skips the test when none is installed."""
    from tests.support.chromium import Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (make system-deps installs it)")
    return Chromium(binary)


@pytest.fixture(scope="session")
def sglang_python() -> str:
    """The interpreter of the SGLang side environment (tests/support/sglang_env.py); skips when not built."""
    from tests.support.sglang_env import ENV_VAR, sglang_python

    path = sglang_python()
    if path is None:
        pytest.skip(f"SGLang side environment not built: run `make sglang-env` (or set {ENV_VAR})")
    return path


@pytest.fixture(scope="session")
def sglang_stack_python(sglang_python: str) -> str:
    """The side environment's interpreter, when it can also run SGLang's transfer stack (nixl, mooncake)."""
    from pdctl.sglang_stack.launcher import probe

    got = probe(sglang_python)
    if isinstance(got, str) or not (got.nixl and got.mooncake):
        pytest.skip(f"{sglang_python} lacks SGLang's transfer libraries (nixl, mooncake): rebuild it with "
                    "`make sglang-env` (scripts/sglang-env/requirements.txt lists them)")
    return sglang_python


# Modules that must not run beside each other under pytest-xdist, by group: each group is one unit of work (one
# worker, its modules one after another). cpu-heavy: they hold most of the machine's CPU for minutes (real SGLang
# servers, whose schedulers poll, and the parity fleet); it runs first. hosts: the modules that build Slurm
# clusters or namespaced "hosts" on this one machine (the same host names, sshd on port 22 in each, the same
# cgroup tree): test_slurm_multinode.py's job never started while other such modules ran beside it.
GROUPS = {
    "cpu-heavy": (
        "tests/launch/test_e2e_sglang_cpu.py",
        "tests/launch/test_e2e_sglang_cpu_gpt_oss.py",
        "tests/diagnose/test_e2e_sglang.py",
        "tests/parity/test_parity_floor.py",
        "tests/parity/test_parity_sglang_stack.py",
    ),
    "hosts": (
        "tests/launch/test_slurm.py",
        "tests/launch/test_slurm_job.py",
        "tests/launch/test_slurm_multinode.py",
        "tests/diagnose/test_e2e_slurm.py",
        "tests/launch/test_multihost.py",
        # one real SGLang server (colocated TP1, not a PD pair) on a namespaced host: its hosts must not meet the
        # other modules' (same names and addresses, sshd on port 22); a lone TP1 server that sleeps when idle
        # beside a cpu-heavy module's PD pair never makes two PD pairs at once
        "tests/launch/test_e2e_sglang_ssh.py",
        "tests/launch/test_e2e_bottleneck.py",
        "tests/preflight/test_multihost.py",
        "tests/preflight/test_scale.py",
        "tests/preflight/test_transfer_sglang.py",
        "tests/test_readme_tour.py",
    ),
}
HEAVY_GROUP = "cpu-heavy"
_GROUP_OF = {module: group for group, modules in GROUPS.items() for module in modules}


def xdist_group(nodeid: str) -> str:
    """The unit a worker takes whole: the test's group, or else its module."""
    module = nodeid.split("::")[0]
    return _GROUP_OF.get(module, module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: xdist_group(item.nodeid) != HEAVY_GROUP)  # stable: modules stay together


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup` (make test): xdist's own loadgroup reads groups from node ids rewritten by the workers,
    which pytest 9.2's node ids no longer allow; the groups are computed here from the node ids instead."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return ModuleGroups(config, log)


def strict() -> bool:
    """Whether this run treats skips as failures (CI)."""
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if strict() and skipped:
        terminalreporter.section(f"{STRICT_ENV}=1: skipped tests fail this run", red=True)
        for report in skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            terminalreporter.write_line(f"SKIPPED {report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if strict() and skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
