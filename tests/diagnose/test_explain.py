"""Ordering failures across processes, root cause first, and the unknown failure (pure: pdctl.diagnose.explain)."""

from __future__ import annotations

from pdctl.diagnose.explain import NO_KNOWN_CAUSE, ProcessLog, explain
from pdctl.diagnose.kb_platform import EXIT_LINE, PLATFORM_LINE, STOPPED_LINE
from pdctl.executors.slurm_jobs import JobEnd

WAITING = ("[2026-12-03 10:45:00 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='a' decode_req.req."
           "bootstrap_room=7 with exception KVTransferError(bootstrap_room=7): Request 7 timed out after 300.0s in "
           "KVPoll.WaitingForInput")
NO_PREFILL = ("2026-12-03 10:46:00 ERROR sglang_router_rs::routers::http::pd_router: Failed to select PD pair error=No "
              "available prefill workers (all circuits open or unhealthy)")


def test_decode_timeout_follows_the_stopped_prefill_which_comes_first() -> None:
    found = explain([
        ProcessLog("decode-0", "decode", 0, "local", ["2026-12-03 10:40:00 INFO up", WAITING]),
        ProcessLog("router", "router", 0, "local", [NO_PREFILL]),
        ProcessLog("prefill-0", "prefill", 0, "local", ["2026-12-03 10:40:00 INFO up"], [STOPPED_LINE], failed=True),
    ])
    assert [f.process for f in found.findings] == ["prefill-0", "decode-0", "router"]
    assert found.root.what == "stopped" and found.failed
    assert found.findings[1].explanation == "decode-0's sglang-waiting-timeout follows prefill-0's stopped"
    assert found.findings[2].follows == "prefill-0"
    assert "root cause first" in found.summary()


def test_roots_are_in_time_order_and_an_unexplained_consequence_stays_a_root() -> None:
    found = explain([
        ProcessLog("decode-0", "decode", 0, "n1", [WAITING]),
        ProcessLog("prefill-0", "prefill", 0, "n0",
                   ["2026-12-03 10:41:00 ERROR x", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"]),
        ProcessLog("prefill-1", "prefill", 1, "n0", ["[2026-12-03 10:39:00] x",
                                                     "OSError: [Errno 98] Address already in use"]),
    ])
    assert [f.what for f in found.findings] == ["address-in-use", "cuda-oom", "sglang-waiting-timeout"]
    assert found.findings[2].follows == "prefill-1"  # the earliest failure of the blamed role


def test_an_unknown_failure_shows_its_first_error_and_says_no_known_cause() -> None:
    lines = ["2026-12-03 10:40:00 INFO loading", "2026-12-03 10:40:01 INFO still loading",
             "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "ZeroDivisionError: division by zero"]
    found = explain([ProcessLog("prefill-0", "prefill", 0, "local", lines, [EXIT_LINE.format(code=1, signal="")],
                                failed=True)])
    (f,) = found.findings
    assert f.signature is None and found.failed
    assert f.to_json()["cause"] == NO_KNOWN_CAUSE and f.to_json()["fix"] is None
    assert f.context[0].endswith("INFO loading") and "ZeroDivisionError: division by zero" in f.context
    assert NO_KNOWN_CAUSE in found.summary() and "ZeroDivisionError" in found.summary()


def test_a_healthy_run_and_a_warning_alone_are_no_failure() -> None:
    assert not explain([ProcessLog("decode-0", "decode", 0, "local", ["2026-12-03 10:40:00 INFO fine"])]).failed
    warned = explain([ProcessLog("decode-0", "decode", 0, "local",
                                 ["[2026-12-03 10:40:02] KV cache pool is full. Retract requests. #retracted_reqs: 1"])])
    assert warned.findings and not warned.failed and warned.root is None


def test_a_collective_timeout_follows_the_failure_of_another_rank_of_the_same_server() -> None:
    found = explain([
        ProcessLog("decode-0-n0", "decode", 0, "n0", [("[2026-12-03 10:50:00] [Rank 0] Watchdog caught collective "
                                                      "operation timeout: WorkNCCL(SeqNum=5)")]),
        ProcessLog("decode-0-n1", "decode", 0, "n1", [], [EXIT_LINE.format(code=-9, signal=" (SIGKILL)")], failed=True),
        ProcessLog("decode-1", "decode", 1, "n2", [], [EXIT_LINE.format(code=-6, signal=" (SIGABRT)")], failed=True),
    ])
    nccl = next(f for f in found.findings if f.what == "nccl-watchdog")
    assert nccl.follows == "decode-0-n1"


def test_a_stopped_process_that_logged_an_earlier_request_error_is_blamed_for_its_stop() -> None:
    """A request refused earlier (its pool was too small) is an unrelated root; decode's timeout follows the stop."""
    kv_oom = ("2026-12-03 10:30:00,000 WARNING pdctl.reference.scheduler: request a failed (HTTP 503): KV cache out of "
              "memory in the full pool: need 90 pages of 16 tokens, 30 of 32 free (raise --max-total-tokens)")
    found = explain([
        ProcessLog("decode-0", "decode", 0, "local", [WAITING]),
        ProcessLog("prefill-0", "prefill", 0, "local", [kv_oom], [STOPPED_LINE], failed=True),
    ])
    assert [(f.process, f.what) for f in found.findings] == [
        ("prefill-0", "stopped"), ("prefill-0", "ref-kv-oom"), ("decode-0", "sglang-waiting-timeout")]
    assert found.findings[2].explanation.endswith("follows prefill-0's stopped")


def test_a_process_gone_after_a_known_failure_is_not_also_said_to_have_ended_without_one() -> None:
    # a real launch (SGLang 0.5.23, an invalid --schedule-policy on both roles): decode's parser refused it and
    # decode was gone with no exit code pdctl could read; "its log ends without a known error" would be false
    bad = "sglang serve: error: argument --schedule-policy: invalid choice: 'fastest' (choose from 'lpm', 'random')"
    gone = EXIT_LINE.format(code="unknown", signal="")
    found = explain([ProcessLog("decode-0", "decode", 0, "local", ["usage: sglang serve [-h]", bad], [gone],
                                failed=True)])
    assert [(f.process, f.what) for f in found.findings] == [("decode-0", "sglang-bad-flag")]
    silent = explain([ProcessLog("decode-0", "decode", 0, "local", ["INFO up"], [gone], failed=True)])
    assert [f.what for f in silent.findings] == ["exited-silently"]  # gone without a word: still said


# A Slurm run: its steps' logs, and its job (pdctl.executors.slurm_job: the job's output, read for Slurm's and
# pyxis's words only, and Slurm's record of its end as a platform line)
JOB_COMPONENTS = ("Slurm", "pyxis/enroot")
BAD_FLAG = "python -m pdctl.reference: error: argument --transfer-timeout: invalid float value: 'soon'"


def _record(state: str, reason: str, code: str) -> str:
    return PLATFORM_LINE.format(line=JobEnd("7", state, reason, code).line())


def test_the_steps_slurm_lines_follow_the_jobs_failure_which_comes_first() -> None:
    step = "slurmstepd-a: error: *** STEP 7.2 ON a CANCELLED AT 2026-12-04T15:49:20 DUE TO NODE FAILURE ***"
    job = "slurmstepd-a: error: *** JOB 7 ON a CANCELLED AT 2026-12-04T15:49:21 DUE TO NODE FAILURE ***"
    found = explain([
        ProcessLog("prefill-0", "prefill", 0, "pa", ["2026-12-04 15:49:18,000 INFO ready", step]),
        ProcessLog("decode-0", "decode", 0, "db", ["2026-12-04 15:49:18,000 INFO ready", "srun: error: Node failure on b"]),
        ProcessLog("slurm-job-7", "job", 0, "pa", ["pdctl job: a is x86_64", job],
                   [_record("NODE_FAIL", "NodeDown", "0:0")], failed=True, components=JOB_COMPONENTS),
    ])
    assert [(f.process, f.what, f.follows) for f in found.findings] == [
        ("slurm-job-7", "slurm-node-fail", None), ("decode-0", "slurm-node-fail", "slurm-job-7"),
        ("prefill-0", "slurm-node-fail", "slurm-job-7")]
    root = found.root
    assert root.line == job and root.time is not None and root.time.second == 21  # slurmstepd's time, mid-line
    assert root.context[-1] == _record("NODE_FAIL", "NodeDown", "0:0")  # Slurm's record: evidence, one finding


def test_a_failed_job_follows_the_engine_failure_and_its_output_quoting_it_is_not_the_jobs_finding() -> None:
    output = ["error: decode-0 exited with code 2 while starting", f"    {BAD_FLAG}", "diagnosis (root cause first):"]
    found = explain([
        ProcessLog("decode-0", "decode", 0, "db", ["usage: python -m pdctl.reference [-h]", BAD_FLAG]),
        ProcessLog("slurm-job-7", "job", 0, "pa", output, [_record("FAILED", "NonZeroExitCode", "1:0")],
                   failed=True, components=JOB_COMPONENTS),
    ])
    assert [(f.process, f.what, f.follows) for f in found.findings] == [
        ("decode-0", "ref-bad-flag", None), ("slurm-job-7", "slurm-job-failed", "decode-0")]


def test_a_failed_job_alone_is_the_root_with_its_outputs_first_error() -> None:
    output = ["pdctl job: a is x86_64; building a venv", "ERROR: Could not find a version that satisfies pdctl",
              "pdctl job: the venv could not be built"]
    found = explain([ProcessLog("slurm-job-7", "job", 0, "pa", output, [_record("FAILED", "NonZeroExitCode", "1:0")],
                                failed=True, components=JOB_COMPONENTS)])
    (f,) = found.findings
    assert f.what == "slurm-job-failed" and f.follows is None and found.failed
    assert "ERROR: Could not find a version that satisfies pdctl" in f.context


def test_a_steps_memory_kill_is_the_root_of_the_jobs_failure_not_the_other_way_round() -> None:
    oom = "slurmstepd: error: Detected 1 oom_kill event in StepId=7.1. Some of the step tasks have been OOM Killed."
    found = explain([
        ProcessLog("decode-0", "decode", 0, "db", [oom]),
        ProcessLog("slurm-job-7", "job", 0, "pa", [], [_record("FAILED", "NonZeroExitCode", "1:0")], failed=True,
                   components=JOB_COMPONENTS),
    ])
    assert [(f.process, f.what, f.follows) for f in found.findings] == [
        ("decode-0", "slurm-oom", None), ("slurm-job-7", "slurm-job-failed", "decode-0")]


def test_a_pods_memory_kill_is_named_before_the_crash_loop_that_follows_it() -> None:
    status = ["[pdctl] pod pd-decode-0: previous container ended OOMKilled (exit code 137)",
              "[pdctl] pod pd-decode-0: CrashLoopBackOff back-off 10s restarting failed container=decode"]
    found = explain([ProcessLog("decode-0", "decode", 0, "gpu-1", ["Loading weights ..."], status, failed=True)])
    assert [f.what for f in found.findings] == ["kube-oomkilled"]


def test_a_scheduler_exception_is_found_with_the_exception_it_ends_with_unless_a_specific_cause_is_inside() -> None:
    # SGLang's scheduler logs "Scheduler hit an exception: Traceback ..." and ends the server: the finding quotes
    # the exception the traceback ends with (lines of a real gpt-oss prefill's log on this machine); the same
    # traceback ending in words a specific signature knows (SGLang's page-size check) is that signature instead
    from pdctl.diagnose.explain import ProcessLog, explain
    from pdctl.sglang.messages import page_size_mismatch

    head = ["[2026-12-04 16:14:50] INFO:     127.0.0.1:1 - \"POST /generate HTTP/1.1\" 200 OK",
            "[2026-12-04 16:14:56] Scheduler hit an exception: Traceback (most recent call last):",
            *[f'  File "/sglang/srt/managers/scheduler.py", line {n}, in run_event_loop' for n in range(8)],
            "    per_req_key = k_cache[per_req_tokens].movedim(0, query.dim() - 2)"]
    crash = [*head, "IndexError: index 3280 is out of bounds for dimension 0 with size 3280", "",
             "[2026-12-04 16:14:56] SIGQUIT received. signum=None, frame=None. It usually means one child failed."]
    found = explain([ProcessLog("prefill-0", "prefill", 0, "local", crash, [], failed=True)])
    root = found.root
    assert root is not None and root.what == "sglang-scheduler-exception", found.summary()
    assert root.context[-1].startswith("IndexError: index 3280") and "no known cause" not in found.summary()
    specific = [*head, "RuntimeError: " + page_size_mismatch(16, 32)]
    found = explain([ProcessLog("decode-0", "decode", 0, "local", specific, [], failed=True)])
    assert found.root is not None and found.root.what == "sglang-page-size-mismatch", found.summary()
