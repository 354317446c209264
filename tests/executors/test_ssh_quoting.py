"""The ssh executor's remote command: arguments and environment reach the node literally, whatever they hold."""

from __future__ import annotations

import json
import shlex

from pdctl.executors.ssh import ssh_argv, start_script
from pdctl.render.deployment import render
from pdctl.topology import load_topology_text
from tests.support.launch_samples import SGLANG_BASE


def test_ssh_remote_command_carries_injection_text_literally() -> None:
    evil = "x; rm -rf / #$(reboot)`id`'\"\n&& halt"
    text = SGLANG_BASE.replace(
        "python: /opt/venv/bin/python}", f"python: /opt/venv/bin/python, env: {{EVIL: {json.dumps(evil)}}}}}"
    )
    text = text.replace("log-level: info,", f"served-model-name: {json.dumps(evil)},")
    proc = render(load_topology_text(text)).workers[0]
    log = f"/runs/{evil}/prefill-0.log"
    argv = ssh_argv(proc.host, {"port": 22}, start_script(proc, log))
    outer = shlex.split(argv[-1])  # what the remote login shell hands to sh
    assert outer[:2] == ["sh", "-c"] and len(outer) == 3
    words = shlex.split(outer[2], posix=True)
    start = words.index("setsid")
    end = words.index(">>", start)
    assert words[start:end] == ["setsid", "env", *[f"{k}={v}" for k, v in proc.env.items()], *proc.argv]
    assert f"EVIL={evil}" in words and evil in words and log in words
