"""Which path a running deployment's KV takes, read from its prefill servers' logs (`pdctl status`).

Prefill writes KV into decode's memory, so the prefill side's transfer library says what it chose: UCX's
protocol tables (pdctl.render.transfer renders UCX_PROTO_INFO=y for NIXL) name the
transport/device per endpoint, Mooncake's init lines name its transport and address. The tables appear at the
first KV transfer; before that the path is honestly "not known yet".
"""

from __future__ import annotations

from typing import Any

from pdctl.executors import executor_for
from pdctl.preflight.parsers.mooncake_log import parse_mooncake_log
from pdctl.preflight.parsers.ucx_proto import write_path

# Lines of interest only: UCX table rows/titles, Mooncake's transport lines.
PATTERN = r"\|.*\||Transfer Engine RPC|Transport|HCAs"
GREP_TIMEOUT_S = 20


def _grep(record: dict[str, Any]) -> str:
    argv = ["grep", "-E", PATTERN, str(record["log"])]
    done = executor_for(record).run(argv, timeout=GREP_TIMEOUT_S)
    return done.stdout if done.returncode in (0, 1) else ""


def transfer_path(record: dict[str, Any]) -> str:
    """What carried this prefill server's KV writes, as one line."""
    text = _grep(record)
    path = write_path(text)
    if path is not None:
        crossing = "crosses nodes" if path.crosses_nodes else "stays on one machine"
        return f"nixl: {path.describe()}, {crossing}"
    setups = parse_mooncake_log(text)
    if setups:
        setup = setups[-1]
        hcas = f", {setup.hcas} HCA(s)" if setup.hcas is not None else ""
        return f"mooncake: {setup.transport or 'transport not logged'} at {setup.rpc_address}{hcas}"
    return "not known yet (no KV transfer logged so far)"
