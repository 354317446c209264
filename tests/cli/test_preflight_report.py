"""preflight's printed report stays readable at cluster scale (pdctl.cli.preflight.print_report): one row per
node, a finding shared by every node printed once with "all N nodes", a failure naming its node, the checks that
passed as ids with counts; a passed launch-side brief sums up many transfers. Pure printing over a report
built here (the checks themselves are tested on real nodes in tests/preflight/)."""

from __future__ import annotations

from rich.console import Console

from pdctl.cli.preflight import print_brief, print_report
from pdctl.preflight.report import NodeReport, PreflightReport, TransferResult, failed, passed

UCX = "ucx_info -d: not installed; cannot list UCX's transports"


def _report(nodes: int, *, port_taken_on: str | None = None) -> PreflightReport:
    out = []
    for i in range(nodes):
        name = f"n{i}"
        checks = [passed("reach", f"{name} answered"), passed("python", "3.11"),
                  failed("ucx.transports", UCX, severity="warning", fix="install UCX's tools")]
        if name == port_taken_on:
            checks.append(failed("port", "10.0.0.1:30000 is already in use", fix="stop what listens"))
        out.append(NodeReport(name, f"10.0.0.{i}", ["prefill" if i % 2 else "decode"], checks,
                              {"executor": "ssh", "hostname": f"h{i}", "probe_s": 0.5}))
    transfers = [TransferResult(f"n{i}", f"n{i + 1}", "nixl", "tcp/pd0 (inter-node)", True, 0.01 * (i + 1), 30.0, True)
                 for i in range(0, nodes, 2)]
    plan = {"mode": "cover", "pairs": [[t.source, t.target] for t in transfers],
            "rounds": [[[t.source, t.target] for t in transfers]]}
    return PreflightReport("big", out, transfers, transfer_plan=plan, agents={n.node: {} for n in out})


def _printed(fn, report: PreflightReport) -> str:  # type: ignore[no-untyped-def]
    console = Console(record=True, width=160, force_terminal=False)
    fn(report, console)
    return console.export_text()


def test_a_warning_every_node_shares_is_printed_once() -> None:
    text = _printed(print_report, _report(64))
    assert text.count(UCX) == 1 and "all 64 nodes" in text
    assert "reach (64)" in text and "python (64)" in text
    assert "preflight passed" in text
    assert len(text.splitlines()) < 64 + 60  # a row per node and the transfers, not ~26 lines per node


def test_a_failure_names_its_node_and_fails_the_verdict() -> None:
    report = _report(16, port_taken_on="n5")
    text = _printed(print_report, report)
    row = next(line for line in text.splitlines() if line.lstrip().startswith("port"))
    assert " n5 " in row and "already in use" in row
    assert not report.ok and "preflight failed" in text
    assert "n5: port: 10.0.0.1:30000 is already in use" in report.summary()


def test_an_expired_deadline_fails_and_is_named() -> None:
    report = _report(2)
    report.expired, report.deadline_s = ["transfer n0 -> n1 (running)"], 5.0
    text = _printed(print_report, report)
    assert not report.ok and "deadline (5s) expired; still running: transfer n0 -> n1 (running)" in text
    assert "deadline (5s) expired" in report.summary()
    assert report.to_json()["deadline"] == {"seconds": 5.0, "expired": True,
                                            "still_running": ["transfer n0 -> n1 (running)"]}


def test_the_brief_lists_few_transfers_and_sums_up_many() -> None:
    few = _printed(print_brief, _report(4))
    assert "transfer n0 -> n1: 0.010 GB/s" in few and "transfer n2 -> n3" in few
    many = _printed(print_brief, _report(64))
    assert "32 transfers verified (pdctl); slowest n0 -> n1 0.010 GB/s; over tcp/pd0 (inter-node)" in many
    assert "transfer n2 -> n3" not in many
