"""Pure pieces of launch: log selection, --dry-run and the Slurm script as the CLI prints them, bad run state
and run dirs as bad input, a state.json launch never overwrites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.launch.logs import select

RECORDS = [
    {"name": n, "role": n.split("-")[0], "replica": int(n.split("-")[1])}
    for n in ("prefill-0", "prefill-1", "decode-0", "decode-0-n1")
] + [{"name": "router", "role": "router", "replica": 0}]


@pytest.mark.parametrize(
    "selector, names",
    [
        (None, ["prefill-0", "prefill-1", "decode-0", "decode-0-n1", "router"]),
        ("prefill", ["prefill-0", "prefill-1"]),
        ("prefill:1", ["prefill-1"]),
        ("decode:0", ["decode-0", "decode-0-n1"]),
        ("decode-0-n1", ["decode-0-n1"]),
        ("router", ["router"]),
    ],
)
def test_log_selection(selector: str | None, names: list[str]) -> None:
    assert [r["name"] for r in select(RECORDS, selector)] == names


@pytest.mark.parametrize("selector", ["worker", "prefill:x", "decode:7"])
def test_log_selection_errors(selector: str) -> None:
    with pytest.raises(UserError):
        select(RECORDS, selector)




def test_dry_run_prints_every_command_and_writes_the_plan(tmp_path: Path) -> None:
    from tests.support.launch_e2e import pdctl
    from tests.support.launch_samples import REPO

    run_dir = tmp_path / "run"
    done = pdctl(
        "launch",
        str(REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"),
        "--dry-run",
        "--run-dir",
        str(run_dir),
        "--json",
        "-",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the JSON alone on stdout; the human listing on stderr
    assert doc == json.loads((run_dir / "plan.json").read_text())
    commands = [p["command"] for p in doc["processes"]] + [doc["router"]["command"]]
    stderr_lines = done.stderr.splitlines()
    for command in commands:
        assert command in stderr_lines  # each on one line, copy-pasteable
    assert "# node p0 (10.0.0.11)" in done.stderr and "# node d0 (10.0.0.12)" in done.stderr
    assert not (run_dir / "state.json").exists()


def test_slurm_dry_run_writes_and_prints_the_script(tmp_path: Path) -> None:
    from tests.support.launch_e2e import pdctl
    from tests.support.launch_samples import REPO, slurm_variant

    config = slurm_variant(REPO / "configs" / "llama-3.1-8b-p4-d2-h100.yaml", tmp_path)
    done = pdctl("launch", str(config), "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "run" / "launch.sbatch").read_text()
    assert script == done.stdout  # stdout is exactly the script (`> job.sbatch` keeps it runnable)
    assert "#SBATCH --nodes=1" in script.splitlines() and "--in-allocation" in script
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())  # every process an srun step
    assert all(p["command"].startswith("srun ") for p in [*plan["processes"], plan["router"]])






def test_print_error_keeps_log_lines_whole_and_escapes_the_message() -> None:
    from pdctl.cli.console import err_console, print_error

    long_line = "x" * 150 + " [bold]not markup[/bold] " + "y" * 50
    with err_console.capture() as capture:
        print_error("bad value [red]x[/red]", "--- last 2 lines ---\n" + long_line)
    lines = capture.get().splitlines()
    assert lines[0] == "error: bad value [red]x[/red]"  # escaped: the brackets are text
    assert lines[1:] == ["--- last 2 lines ---", long_line]  # no wrapping at the console width


@pytest.mark.parametrize(
    "state_text, args, message",
    [
        ("[]", ["status"], "expected a JSON object in a run state, got list"),
        ('{"processes": 3}', ["logs"], "run state has no valid `processes` list"),
        ("{", ["down"], "not valid JSON"),
        ("{}", ["status", "--json", "{tmp}/no/such/dir/s.json"], "cannot write"),
        # pgid 0 is the CALLER's own process group: `down` once killed the shell (and pytest) that ran it
        ('{"processes": [{"name": "prefill-0", "pid": 0, "pgid": 0, "executor": "local"}]}', ["down"],
         "has pid 0, which is not a process pdctl started; refusing to act on it"),
        ('{"processes": [], "router": {"pid": 1, "pgid": 1}}', ["status"], "has pid 1, which is not a process"),
    ],
)
def test_bad_run_state_or_json_path_is_bad_input(
    tmp_path: Path, state_text: str, args: list[str], message: str
) -> None:
    from tests.support.launch_e2e import pdctl

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "state.json").write_text(state_text)
    argv = [a.format(tmp=tmp_path) for a in args] + ["--run-dir", str(tmp_path / "run")]
    done = pdctl(*argv, cwd=tmp_path)
    assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr


def test_run_dir_that_cannot_be_created_is_bad_input(tmp_path: Path) -> None:
    from tests.support.launch_e2e import pdctl
    from tests.support.launch_samples import REPO

    (tmp_path / "file").write_text("")
    topo = str(REPO / "configs" / "local-cpu.yaml")
    done = pdctl("launch", topo, "--dry-run", "--run-dir", str(tmp_path / "file" / "run"), cwd=tmp_path)
    assert done.returncode == 2 and "cannot create run directory" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("state_text", ["{", "[]", '{"processes": 3}'])
def test_launch_never_overwrites_an_unreadable_state_json(tmp_path: Path, ref_checkpoint: Path, state_text: str) -> None:
    """Issue 16: an unreadable state.json of a previous launch (maybe the only record of live processes) was
    silently overwritten by the next launch."""
    from tests.support.launch_e2e import pdctl
    from tests.support.launch_samples import local_cpu

    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text(state_text)
    topo = local_cpu(tmp_path, ref_checkpoint, name="over-broken-state")
    done = pdctl("launch", str(topo), "--run-dir", str(run), "--detach", "--skip-compat", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "will not overwrite it" in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert (run / "state.json").read_text() == state_text
