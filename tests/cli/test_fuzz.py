"""CLI fuzz: every command and subcommand, found from the click tree (so a new command is covered the day it
is added), run with hypothesis-generated arguments, option values and input files, must end with exit 0, 1 or
2, say in one screen what was wrong when it is 2, and never print a traceback.

Inputs come from a pool built once per session (tests/support/fuzz_inputs.py): valid and broken topologies,
JSONL data and prompt files, run dirs with broken or missing state.json/plan.json, directories where files are
expected, non-UTF-8 and huge files, URLs where nothing listens. The pool is chosen so that no command can do
long real work or reach the network: valid topologies run on 127.0.0.1 with an engine interpreter that does not
exist, URLs point at reserved loopback ports with nothing behind them.

Commands run in a worker process (tests/support/fuzz_worker.py) that calls the entry point's own
`procexit.call_main(run)` for each example: an unexpected exception prints its traceback (and the example fails
on it), SystemExit gives its code as it would in `pdctl`, and a command that hangs fails its example. A few hundred examples per `make test`; `PDCTL_FUZZ_EXAMPLES=5000` (per command) for a long run.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdctl.cli.main import cli
from tests.support.fuzz_inputs import FuzzPool, build_pool
from tests.support.fuzz_worker import MARK
from tests.support.paths import REPO
from tests.support.servers import kill_group

PER_COMMAND = int(os.environ.get("PDCTL_FUZZ_EXAMPLES", "25"))
ONE_SCREEN = 40  # lines of stderr an exit-2 message may take
# parameter name (substring) -> the kind of pool path it is mostly given
PATH_KINDS = {"topology": "topology", "run_dir": "run_dir", "data_file": "jsonl", "shots_file": "jsonl",
              "prompts": "jsonl", "json_path": "output", "report": "output", "results": "output",
              "directory": "checkpoint", "work_dir": "workdir", "tool_python": "executable"}
EXAMPLE_TIMEOUT_S = 180  # a command still running after this is a hang (every wait has a timeout)
# Options that make a command run until Ctrl-C: such an example gets Ctrl-C (SIGINT) once it has run this long,
# as a user would press it, and must then end with its documented exit code (0), not a hang or 130.
UNTIL_CTRL_C = {"--watch", "-w", "--follow", "-f"}
CTRL_C_AFTER_S = 3.0
FUZZ = settings(max_examples=PER_COMMAND, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck))


def walk(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every leaf command below GROUP, with its full name (lazy groups are asked for each subcommand)."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, f"{' '.join(prefix + (name,))} is listed but cannot be loaded"
        if isinstance(cmd, click.Group):
            out += walk(cmd, prefix + (name,))
        else:
            out.append((prefix + (name,), cmd))
    return out


COMMANDS = walk(cli)
# Commands whose valid inputs start real processes, transfer backends or servers: e2e (make test-fast skips them).
STARTS_PROCESSES = {"launch", "bench-transfer", "preflight", "reference serve", "reference init-checkpoint",
                    "bench serve", "parity"}


def test_the_click_tree_has_every_documented_command() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"check-compat", "plan", "schema", "launch", "status", "logs", "down", "eval gsm8k", "parity",
            "bench-transfer", "reference init-checkpoint", "reference serve"} <= names, names


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> FuzzPool:
    return build_pool(tmp_path_factory.mktemp("fuzz-pool"))


def mostly(good: st.SearchStrategy[str], bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """GOOD nine times in ten: a command line with many options gets past parsing often enough to reach the
    command's own checks and work, while every option is still sometimes wrong."""
    return st.one_of(*[good] * 9, bad)


def value_for(param: click.Parameter, pool: FuzzPool) -> st.SearchStrategy[str]:
    """Strings for one parameter, from its click type: mostly sensible, sometimes wrong on purpose."""
    t = param.type
    junk = st.sampled_from(["", "-", "--", "x", "-1", "0", "1e99", "nan", "\u00e9\u00e8", "a" * 300, "[x]"])
    if isinstance(t, click.Choice):
        return mostly(st.sampled_from([str(c) for c in t.choices]), junk)
    if isinstance(t, click.Path):
        kind = next((k for key, k in PATH_KINDS.items() if key in (param.name or "")), None)
        if kind in ("output", "workdir", "executable"):  # never an input of the pool: a command would write
            return mostly(st.sampled_from(pool.kinds[kind]), junk)  # over it (or run it)
        meant = st.sampled_from(pool.kinds[kind]) if kind else st.sampled_from(pool.paths)
        return mostly(meant, st.one_of(st.sampled_from(pool.paths), junk))  # mostly the right kind of path
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)):
        # small values, or absurd ones that must be refused quickly (not "legitimately long" middles)
        return mostly(st.integers(1, 8).map(str), st.one_of(st.integers(-3, 0).map(str), st.sampled_from(
            ["0.5", "1e3", "-0", "64", "1000000000", str(2**63)]), junk))
    name = (param.name or "").lower()
    if name == "process":  # `logs PROCESS`: selectors of the pool's runs, and ones that match nothing
        return mostly(st.sampled_from(["prefill-0", "router", "prefill", "prefill:0", "decode", "colocated:1"]), junk)
    if "url" in name or name in ("candidate", "reference"):
        return mostly(st.sampled_from(pool.urls), junk)
    if t is click.UNPROCESSED or name == "args":
        return st.one_of(st.sampled_from(pool.server_flags), st.sampled_from(pool.paths), junk)
    return st.one_of(st.sampled_from(pool.paths + pool.urls), st.text(max_size=20), junk)


@st.composite
def argv_for(draw: st.DrawFn, cmd: click.Command, pool: FuzzPool) -> list[str]:
    argv: list[str] = []
    # a third of the examples give few options: a command line with many options is almost always refused at
    # parsing (one wrong value, two options that exclude each other), so these are what reach the commands' work
    sparse = draw(st.integers(0, 2)) == 0
    for param in cmd.params:
        if isinstance(param, click.Argument):
            count = 1 if param.nargs == 1 else draw(st.integers(0, 4))
            if draw(st.integers(0, 9 if param.required else 2)) == 0:
                count = 0  # a missing argument (an optional one is often left out)
            argv += [draw(value_for(param, pool)) for _ in range(count)]
        elif isinstance(param, click.Option) and (draw(st.integers(0, 5)) == 0 if sparse else draw(st.booleans())):
            flag = draw(st.sampled_from(param.opts))
            if param.is_flag or param.count:
                argv.append(flag)
            else:
                argv += [flag, draw(value_for(param, pool))]
    if draw(st.integers(0, 11)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--no-such-option", "extra-arg"])))
    return argv


class Worker:
    """The fuzz worker process; restarted after a crash or a hang (which fail their example)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.fuzz_worker"], cwd=REPO, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(proc, self.lines), daemon=True).start()
        return proc

    @staticmethod
    def _read(proc: subprocess.Popen, lines: queue.Queue) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def run(self, argv: list[str], cwd: Path, ctrl_c_after: float | None = None) -> tuple[int | str, str, str]:
        """ARGV's exit code, stdout and stderr (a string code says what went wrong instead). CTRL_C_AFTER: if
        the command is still running after that many seconds, press Ctrl-C (once)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n")
        self.proc.stdin.flush()
        noise: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=ctrl_c_after or EXAMPLE_TIMEOUT_S)
            except queue.Empty:
                if ctrl_c_after is not None:
                    os.kill(self.proc.pid, signal.SIGINT)
                    ctrl_c_after = None
                    continue
                self.close()
                return f"hung for {EXAMPLE_TIMEOUT_S}s", "", "".join(noise[-50:])
            if line is None:
                code = self.proc.wait(timeout=30)
                self.proc = None
                return f"worker died (exit {code})", "", "".join(noise[-50:])
            if line.startswith(MARK):
                doc = json.loads(line[len(MARK):])
                return doc["code"], doc["out"], doc["err"]
            noise.append(line)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin:
                self.proc.stdin.close()
            kill_group(self.proc, timeout=30)
            self.proc = None


@pytest.fixture()
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.close()


@pytest.mark.parametrize(
    "path,cmd",
    [pytest.param(p, c, id=" ".join(p), marks=[pytest.mark.e2e] if " ".join(p) in STARTS_PROCESSES else [])
     for p, c in COMMANDS],
)
def test_fuzzed_arguments_end_in_0_1_or_2_without_a_traceback(
    path, cmd, pool: FuzzPool, worker: Worker, tmp_path: Path, record_property
) -> None:
    ran: list[int] = []

    @FUZZ
    @given(argv_for(cmd, pool), st.sampled_from([None, *pool.kinds["run_dir"]]))
    def one(argv: list[str], latest: Path | None) -> None:
        full = [*path, *argv]
        # a fresh working directory per example: what one example writes (a checkpoint `reference init-checkpoint
        # -` puts in ./-, a run dir) must not become a valid input of the next (`reference serve --model-path -`
        # would then really serve). LATEST: the run `launch` would have recorded there (status, logs, down, eval
        # and bench serve use it without --run-dir).
        cwd = Path(tempfile.mkdtemp(dir=tmp_path))
        if latest is not None:
            (cwd / ".pdctl").mkdir()
            (cwd / ".pdctl" / "latest").write_text(f"{latest}\n")
        until_ctrl_c = bool(UNTIL_CTRL_C & set(argv))
        code, out, err = worker.run(full, cwd, ctrl_c_after=CTRL_C_AFTER_S if until_ctrl_c else None)
        ran.append(code if isinstance(code, int) else -1)
        shown = f"pdctl {' '.join(full)!r} -> {code}\n--- stdout ---\n{out[-1500:]}\n--- stderr ---\n{err[-3000:]}"
        assert code in (0, 1, 2), shown
        assert "Traceback" not in out and "Traceback" not in err, shown
        if code == 2:
            assert err.strip(), "exit 2 must say what was wrong\n" + shown
            assert len(err.strip().splitlines()) <= ONE_SCREEN, "an exit-2 message must fit one screen\n" + shown

    one()
    # the examples really ran (a strategy that exhausts early would make this a test that checks nothing);
    # the JUnit report carries the count and the exit codes seen
    record_property("examples", len(ran))
    record_property("exit_codes", json.dumps({str(c): ran.count(c) for c in sorted(set(ran))}))
    assert len(ran) >= min(PER_COMMAND, 10), f"only {len(ran)} of {PER_COMMAND} examples ran"  # schema: a small space
