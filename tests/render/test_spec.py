"""The pure pieces of a rendered process: pass-through flags (`args:`) as argv, a pass-through flag replacing
the one pdctl renders, and a reference-engine replica that cannot fit one node."""

from __future__ import annotations

from pathlib import Path

from pdctl.render.spec import flag_args, merge_flags


def test_flag_args_forms() -> None:
    assert flag_args({"a-b": True, "c": False, "d": None, "e": 3, "f": [1, "x"], "--g": "v"}) == [
        "--a-b",
        "--e",
        "3",
        "--f",
        "1",
        "x",
        "--g",
        "v",
    ]


def test_merge_flags_replaces_a_rendered_flag_and_its_values() -> None:
    base = ["py", "-m", "m", "--port", "1", "--flag", "--list", "a", "b", "--host", "h"]
    assert merge_flags(base, {"list": ["c"], "flag": False, "port": 2}) == [
        "py",
        "-m",
        "m",
        "--host",
        "h",
        "--list",
        "c",
        "--port",
        "2",
    ]


def test_reference_replica_spanning_nodes_is_bad_input(tmp_path: Path) -> None:
    from tests.support.launch_e2e import pdctl
    from tests.support.launch_samples import local_cpu

    nodes = [
        {"name": "local", "host": "127.0.0.1", "gpu": "cpu", "gpus": 4},
        {"name": "other", "host": "10.255.255.1", "gpu": "cpu", "gpus": 4},
    ]
    topo = local_cpu(
        tmp_path,
        tmp_path / "ckpt",
        name="too-wide",
        nodes=nodes,
        model={"preset": "reference-tiny"},
        prefill={"tp": 8, "nodes": ["local", "other"]},
        decode={"nodes": ["other"]},
    )
    done = pdctl("launch", str(topo), "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2
    assert "the reference engine runs a replica on one node" in " ".join(done.stderr.split())
