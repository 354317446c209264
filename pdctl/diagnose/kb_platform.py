"""What the layers under SGLang say: NCCL/torch.distributed, CUDA, the OS, the process's end (pdctl's own status
line), Slurm, pyxis/enroot, Kubernetes, and pdctl's CPU reference engine."""

from __future__ import annotations

from pdctl.diagnose.signature import Signature

# pdctl's own status lines, added to a process's log lines when the executor reports its end or state; the
# signatures below match them (one mechanism for every finding)
EXIT_LINE = "[pdctl] the process exited with code {code}{signal}"
STOPPED_LINE = "[pdctl] the process is stopped (state T): it runs no code and answers nothing"
HUNG_LINE = "[pdctl] the process runs but has not answered its health check for {seconds:.0f} s"
# what the platform running a process records of it (Executor.platform_lines: a pod's reason, a Slurm job's end)
PLATFORM_LINE = "[pdctl] {line}"

SIGNATURES = (
    Signature(
        "nccl-watchdog", "NCCL/torch.distributed",
        r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timed out|Timeout)",
        "a collective among the ranks of one server did not finish within the NCCL timeout: one rank is stuck, "
        "dead or much slower than the others",
        "find the rank that failed first (listed first); SGLang's --watchdog-timeout and "
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only hide it; NCCL_DEBUG=INFO in engine.env shows the stuck rank",
        "torch ProcessGroupNCCL.cpp (WorkNCCL::checkTimeout)", "https://github.com/sgl-project/sglang/issues/3783",
        blames="rank"),
    Signature(
        "cuda-oom", "CUDA", r"CUDA out of memory|torch\.OutOfMemoryError|cudaErrorMemoryAllocation",
        "a CUDA allocation failed: the GPU memory is taken by the weights, the KV pool, the CUDA graphs or "
        "another process",
        "lower --mem-fraction-static or --cuda-graph-max-bs, or add TP; `nvidia-smi` for other processes",
        "torch (c10 CUDACachingAllocator)"),
    Signature(
        "oom-killed", "process", r"exited with code -9 \(SIGKILL\)|Out of memory: Killed process",
        "the process was killed by SIGKILL: the kernel's OOM killer (host memory), the scheduler, or a user",
        "check `dmesg` / the node's memory; lower the host memory the role uses; `pdctl restart ROLE:N`",
        "pdctl (the executor's exit status)"),
    Signature(
        "killed-by-signal", "process", r"exited with code -(?!9\b)\d+ \(SIG\w+\)",
        "the process was ended by a signal it did not handle (the line names it)",
        "find who sent it (a user, the scheduler); `pdctl restart ROLE:N`", "pdctl (the executor's exit status)"),
    Signature(
        "exited-silently", "process", r"exited with code unknown",
        "the process is gone and its log ends without a known error: it was killed (SIGKILL from the kernel's "
        "OOM killer, a user or the scheduler) or exited without a word; pdctl cannot read its exit code (it was "
        "not this pdctl process's child)",
        "`dmesg | grep -i killed` on its node for the OOM killer; `pdctl restart ROLE:N`",
        "pdctl (the executor: the process is gone, no exit status)", unexplained_only=True),
    Signature(
        "stopped", "process", r"is stopped \(state T\)",
        "the process is stopped (SIGSTOP, a debugger, or Ctrl-Z): its peers time out waiting for it",
        "`kill -CONT PID` resumes it; else `pdctl restart ROLE:N`", "pdctl (the executor's process state)"),
    Signature(
        "hung", "process", r"has not answered its health check for",
        "the process runs but its HTTP server answers nothing: it is wedged (a deadlock, a stuck collective, "
        "a busy loop)", "`py-spy dump --pid PID` shows where; `pdctl restart ROLE:N`",
        "pdctl (liveness: the health check)"),
    Signature(
        "slurm-time-limit", "Slurm", r"CANCELLED AT .* DUE TO TIME LIMIT|slurm job \d+: TIMEOUT\b",
        "Slurm ended the job at its time limit", "raise slurm.time_limit in the topology (#SBATCH --time)",
        "slurmstepd; slurmctld (job state TIMEOUT)", blames="job"),
    Signature(
        "slurm-node-fail", "Slurm", r"DUE TO NODE FAILURE|Node failure on|NODE_FAIL",
        "Slurm lost a node of the job",
        "exclude the node (slurm.sbatch_directives: {exclude: NODE}, #SBATCH --exclude) and launch again; tell "
        "the admins", "slurmstepd, srun; slurmctld (job state NODE_FAIL)", blames="job"),
    Signature(
        "slurm-oom", "Slurm",
        r"oom[_-]kill event|Some of the step tasks have been OOM Killed|task \d+: Out Of Memory"
        r"|slurm job \d+: OUT_OF_MEMORY\b",
        "the job step exceeded its cgroup memory and Slurm's OOM handling killed it",
        "request more memory (slurm.sbatch_directives: {mem: ...}, #SBATCH --mem) or lower the host memory "
        "the role uses",
        "slurmstepd (task/cgroup); slurmctld (job state OUT_OF_MEMORY)", blames="job"),
    Signature(
        "slurm-preempted", "Slurm", r"CANCELLED AT .* DUE TO PREEMPTION|slurm job \d+: PREEMPTED\b",
        "Slurm preempted the job for a job of higher priority (its partition or QOS allows preemption)",
        "launch on a partition or QOS without preemption (slurm.partition, slurm.qos), or with --requeue in "
        "slurm.sbatch_directives to have Slurm start it again", "slurmstepd; slurmctld (job state PREEMPTED)",
        blames="job"),
    Signature(
        "slurm-job-failed", "Slurm", r"slurm job \d+: FAILED\b",
        "the job's script ended with an error: pdctl's launch inside the job failed (or the job's setup before "
        "it: slurm.setup, the job's venv)",
        "the failure it follows (listed first) is why; without one, the job's output (slurm-<job>.out in the run "
        "dir) holds the launch's error, shown here", "slurmctld (job state FAILED)", blames="any"),
    Signature(
        "pyxis-import", "pyxis/enroot", r"pyxis: failed to import docker image|pyxis: \s*\[ERROR\]",
        "pyxis/enroot could not import the container image (a wrong name, no registry credentials, no space)",
        "check the image name (engine.container) and ~/.config/enroot/.credentials; `enroot import` it by hand",
        "pyxis (spank_pyxis.so)", "https://github.com/NVIDIA/pyxis/issues/168"),
    Signature(
        "pyxis-start", "pyxis/enroot", r"pyxis: couldn't start container|pyxis: container start failed",
        "pyxis could not start the container (its entrypoint, a missing shell, a mount)",
        "read the enroot log lines around it; try --no-container-entrypoint; check the container mounts",
        "pyxis (spank_pyxis.so)", "https://github.com/NVIDIA/pyxis/issues/61"),
    Signature(
        "kube-image-pull", "Kubernetes", r"\bErrImagePull\b|\bImagePullBackOff\b|\bInvalidImageName\b",
        "the kubelet cannot pull the pod's image (a wrong name or tag, or no pull secret)",
        "fix the image in the topology's kubernetes section or add an imagePullSecret; `kubectl describe pod`",
        "kubelet (container waiting reason)"),
    Signature(
        "kube-oomkilled", "Kubernetes", r"\bOOMKilled\b",
        "the container exceeded its memory limit and the kernel killed it",
        "raise the container's memory limit (kubernetes resources) or lower the role's host memory",
        "kubelet (container terminated reason)"),
    Signature(
        "kube-crashloop", "Kubernetes", r"\bCrashLoopBackOff\b",
        "the container keeps exiting and the kubelet restarts it with back-off",
        "the previous container's log holds the reason (`kubectl logs --previous`); fix it, then relaunch",
        "kubelet (container waiting reason)"),
    # pdctl's CPU reference engine (pdctl/reference) -- its own words
    Signature(
        "ref-transfer-timeout", "reference engine", r"KV transfer for bootstrap_room \d+ timed out after",
        "decode gave up on a request whose KV the prefill stopped sending (the prefill is stopped, dead or stuck)",
        "diagnose the prefill named before this; raise --transfer-timeout only when prefill is merely slow",
        "pdctl/reference/roles/decode.py (_poll)", blames="prefill"),
    Signature(
        "ref-peer-gone", "reference engine",
        r"prefill bootstrap server \S+ (did not answer|is unreachable)",
        "decode could not reach its prefill's bootstrap server: the prefill died or stopped answering",
        "find why the prefill died (listed first); `pdctl restart prefill:N`",
        "pdctl/reference/roles/bootstrap.py", blames="prefill"),
    Signature(
        "ref-kv-oom", "reference engine", r"KV cache out of memory",
        "the KV pool is too small for the request (its prompt, or its prompt plus output, needs more pages "
        "than the pool has)", "raise --max-total-tokens (server.args) or send shorter prompts",
        "pdctl/reference/kvcache.py (KVCacheOOM), retraction.py"),
    Signature(
        "ref-bad-model-path", "reference engine", r"no config\.json|: no weights file|cannot load weights",
        "the model path holds no reference checkpoint (config.json + model.safetensors)",
        "fix model.path in the topology, or create one with `pdctl reference init-checkpoint DIR`",
        "pdctl/reference/config.py, checkpoint.py"),
    Signature(
        "ref-bad-flag", "reference engine", r"python -m pdctl\.reference: error: ",
        "the reference engine's argument parser refused the command line (a misspelled flag or a bad value)",
        "fix the flag in server.args (the line names it); `pdctl check-compat` parses the command first",
        "pdctl/reference/args.py (argparse)"),
    Signature(
        "ref-bind", "reference engine", r"cannot bind the (HTTP|bootstrap) server on",
        "a port the reference engine must listen on is taken", "free the port or move the role's ports",
        "pdctl/reference/server.py, roles/bootstrap.py"),
    # generic words last: the specific signatures above that quote them win
    Signature(
        "address-in-use", "OS", r"\[Errno 98\]|[Aa]ddress already in use|EADDRINUSE",
        "a port the process must listen on is taken by another process",
        "free the port (`ss -ltnp`), `pdctl down` the previous run, or move the role's ports in the topology",
        "the kernel (bind: EADDRINUSE)"),
)
