"""SGLang's own PD transfer stack, driven by pdctl: SGLang's KV managers, senders, receivers and bootstrap
server moving real KV pools between real processes (docs/sglang-stack.md).

pdctl.plan re-implements SGLang's transfer *arithmetic*; SGLang's failures in the field live in its *stack*
(registration, handshake, threads, timeouts). This package runs that stack, at a topology's shapes, so that
`bench-transfer --stack sglang`, preflight and the reference engine (`transfer.stack: sglang`) exercise the
code the servers will run.

Two interpreters meet here (SGLang's pins CUDA/torch builds pdctl must not share):
- pdctl's interpreter: `launcher` (find SGLang's interpreter, start a driver with pdctl importable, talk to
  it with deadlines), `spec` (what one side of a rehearsal is, as JSON), `verdict` (stages, agreement with
  check-compat). Light imports only.
- SGLang's interpreter (the side venv, or a node's SGLang): `runtime` (SGLang's runtime context, managers,
  the CPU-rehearsal guard bypass, failure capture), `kvargs` (KVArgs from buffers), `pools` (SGLang's own
  pool classes at the shape, pattern fill and byte check), `flows` (sender/receiver state machines),
  `driver` (the process: `python -m pdctl.sglang_stack.driver`). These import sglang/torch/numpy when
  used. The reference engine's PD roles on SGLang's stack use them from pdctl.reference.roles.sglang_stack.
"""
