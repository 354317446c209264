"""The input pool of the CLI fuzz test (tests/cli/test_fuzz.py): files, run dirs and URLs, good and bad.

Safe by construction: every host is 127.0.0.1, every URL points at a loopback port reserved for this process
with nothing listening, every valid topology's engine interpreter does not exist (a launch fails at once
instead of starting servers), and no file names a model that could be downloaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.net import free_port
from tests.support.paths import CONFIGS_DIR, DATA

NO_PYTHON = "/nonexistent/pdctl-fuzz/python3"


@dataclass
class FuzzPool:
    """Strings the fuzz test draws arguments from; `kinds` groups the paths by what they are meant for
    (topology, jsonl, run_dir, checkpoint, output), so that most draws reach past argument parsing."""

    paths: list[str] = field(default_factory=list)
    kinds: dict[str, list[str]] = field(default_factory=dict)
    urls: list[str] = field(default_factory=list)
    server_flags: list[str] = field(default_factory=list)

    def add(self, kind: str, path: str | Path) -> None:
        self.paths.append(str(path))
        self.kinds.setdefault(kind, []).append(str(path))


def _topology(name: str, base: str, **changes: object) -> dict:
    doc = yaml.safe_load((CONFIGS_DIR / base).read_text())
    doc["name"] = name
    doc["engine"]["python"] = NO_PYTHON
    for role in ("prefill", "decode", "colocated"):
        if role in doc:
            doc[role]["port"] = free_port()
    if "transfer" in doc:
        doc["transfer"]["bootstrap_port"] = free_port()
    doc["router"]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    doc.update(changes)
    return doc


def _gone_record(name: str, role: str, pid: int, port: int, root: Path) -> dict:
    """A state.json process record as `pdctl launch` writes it, of a process that is gone: its pid is above
    any pid_max (never alive, so never signalled)."""
    return {"name": name, "role": role, "replica": 0, "node": "local", "host": "127.0.0.1", "advertise": "127.0.0.1",
            "node_rank": 0, "url": f"http://127.0.0.1:{port}", "health_path": "/health",
            "log": str(root / f"{name}.log"), "executor": "local", "ssh": None, "pid": pid, "pgid": pid,
            "start_time": 1}


def build_pool(root: Path) -> FuzzPool:
    """Write the pool's files under ROOT and return it."""
    pool = FuzzPool()

    def add(name: str, content: str | bytes, kind: str) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        pool.add(kind, path)

    # topologies
    pd = _topology("fuzz-pd", "local-cpu.yaml", model={"path": str(root / "no-such-ckpt"), "preset": "reference-tiny"})
    pd["server"]["context_length"] = 64  # keeps commands that really run (bench-transfer) to small requests
    add("pd.yaml", yaml.safe_dump(pd), "topology")
    colocated = _topology("fuzz-colo", "local-cpu-reference.yaml",
                          model={"path": str(root / "no-such-ckpt"), "preset": "reference-tiny"})
    add("colocated.yaml", yaml.safe_dump(colocated), "topology")
    incompatible = json.loads(json.dumps(pd))
    incompatible["name"] = "fuzz-incompatible"
    incompatible["decode"]["page_size"] = 32
    add("incompatible.yaml", yaml.safe_dump(incompatible), "topology")
    add("bad-syntax.yaml", "name: [unterminated\nengine: {kind: reference\n", "topology")
    add("bad-type.yaml", yaml.safe_dump({**pd, "prefill": {**pd["prefill"], "tp": "two"}}), "topology")
    add("unknown-key.yaml", yaml.safe_dump({**pd, "prefil": {"tp": 1}}), "topology")
    add("empty.yaml", "", "topology")
    add("list.yaml", "- a\n- b\n", "topology")
    add("not-utf8.yaml", b"name: \xff\xfe\x00bad\n", "topology")
    add("long-name.yaml", yaml.safe_dump({**pd, "name": "a" * 300}), "topology")
    add("huge.yaml", "name: huge\n# " + "x" * (2 << 20) + "\n", "topology")
    add("deep.yaml", "a: " + "[" * 200 + "]" * 200 + "\n", "topology")
    (root / "a-dir.yaml").mkdir()
    pool.add("topology", root / "a-dir.yaml")
    pool.add("topology", root / "missing.yaml")
    # JSONL data and prompt files
    questions = (DATA / "gsm8k_test_50.jsonl").read_text().splitlines()[:12]
    add("gsm8k.jsonl", "\n".join(questions) + "\n", "jsonl")
    add("broken.jsonl", '{"question": "x", "answer": "#### 1"}\n{not json\n', "jsonl")
    add("wrong-shape.jsonl", '["a list"]\n{"no": "question"}\n', "jsonl")
    add("not-utf8.jsonl", b'{"question": "\xff", "answer": "#### 1"}\n', "jsonl")
    add("huge-line.jsonl", json.dumps({"question": "q" * (3 << 20), "answer": "#### 1"}) + "\n", "jsonl")
    add("prompts.jsonl", '{"text": "hello"}\n{"input_ids": [1, 2, 3]}\n', "jsonl")
    # run dirs
    prefill_port, router_port = free_port(), free_port()  # nothing listens there
    (root / "prefill-0.log").write_text("# pdctl: python -m pdctl.reference\nserving\n")
    (root / "router.log").write_bytes(b"router \xff log\n")
    for name, files in {
        "run-empty": {},
        "run-bad-json": {"state.json": "{"},
        "run-list": {"state.json": "[]"},
        "run-bad-processes": {"state.json": '{"processes": 3}'},
        "run-dead": {"state.json": json.dumps({
            "topology": "fuzz", "run_dir": "x", "status": "running",
            "processes": [{"name": "prefill-0", "role": "prefill", "replica": 0, "node": "local", "pid": 999999999,
                           "pgid": 999999999, "url": f"http://127.0.0.1:{free_port()}", "log": "/nonexistent/log",
                           "executor": "local"}],
            "router": {"url": f"http://127.0.0.1:{free_port()}", "pid": 0, "pgid": 0, "log": ""}}),
            "plan.json": "{broken"},
        # a well-formed record of a run whose processes are gone (pids above any pid_max: never alive, never
        # signalled): status, logs and down get past reading it
        "run-gone": {"state.json": json.dumps({
            "topology": "fuzz", "run_dir": str(root / "run-gone"), "engine": "reference", "status": "running",
            "launched_at": "2026-01-01T00:00:00Z", "router_url": f"http://127.0.0.1:{router_port}",
            "processes": [_gone_record("prefill-0", "prefill", 999999991, prefill_port, root)],
            "router": {**_gone_record("router", "router", 999999992, router_port, root), "health_path": "/readiness",
                       "metrics_url": f"http://127.0.0.1:{router_port}/metrics"}})},
    }.items():
        run = root / name
        run.mkdir()
        for fname, text in files.items():
            (run / fname).write_text(text)
        pool.add("run_dir", run)
    pool.add("run_dir", root / "no-such-run")
    # checkpoints and unwritable places
    (root / "ckpt-empty").mkdir()
    pool.add("checkpoint", root / "ckpt-empty")
    (root / "ckpt-bad").mkdir()
    (root / "ckpt-bad" / "config.json").write_text('{"model_type": "pdctl-reference", "num_hidden_layers": "four"}')
    pool.add("checkpoint", root / "ckpt-bad")
    pool.add("checkpoint", root / "new-ckpt")
    add("a-file", "plain file", "output")
    for out in (root / "a-file" / "below-a-file", root / "new-output.json", root / "a-dir.yaml", "-"):
        pool.add("output", out)
    for work in (root / "new-work-dir", root / "a-file" / "work", root / "a-file"):
        pool.add("workdir", work)
    for program in ("/nonexistent/pdctl-fuzz/python3", "/bin/false", str(root / "a-file")):
        pool.add("executable", program)
    # URLs: reserved loopback ports with nothing listening, and malformed ones (never another host)
    dead = free_port()
    pool.urls = [f"http://127.0.0.1:{dead}", f"http://127.0.0.1:{dead}/v1", "http://", "ftp://127.0.0.1/x",
                 "http://[::1", "127.0.0.1:1", "http://127.0.0.1:0"]
    # flags for `pdctl reference serve` (its arguments pass through to the server's own parser)
    pool.server_flags = ["--model-path", "--role", "prefill", "decode", "--tp", "3", "--port", "0", "--page-size",
                         "--kv-layout", "vectorized_5d", "--help", "--disaggregation-transfer-backend", "nixl"]
    return pool
