"""SGLang's real server (`sglang.launch_server`) on a CPU node: the few adaptations it needs, in one place.

SGLang 0.5.23's own server runs on CPUs without AMX (/work notes sglang-server-on-cpu.md; docs/sglang-on-cpu.md)
once four places where it assumes a GPU are answered. Those answers live in `adaptations` and nowhere else;
they are applied by `python -m pdctl.sglang_cpu.serve <sglang args>`, the command pdctl renders for a CPU
node (`gpu: cpu`) of an `engine.kind: sglang` topology. A GPU node's command stays `python -m
sglang.launch_server`: nothing here reaches it (tests/render/test_sglang_cpu.py).

This package runs in SGLang's interpreter (the side venv, `make sglang-env`) with pdctl on its PYTHONPATH;
only this file is imported by pdctl's own interpreter (the renderer reads the names below), so it imports
nothing.
"""

from __future__ import annotations

# `python -m SERVE_MODULE <sglang args>`: applies the adaptations, then runs sglang.launch_server's main.
# A module, not the package's __main__: SGLang starts its scheduler and detokenizer with multiprocessing's
# `spawn`, which re-imports the parent's main module in each child by name (as __mp_main__) unless that name
# is a package's __main__; so every SGLang process of the server gets the same adaptations.
SERVE_MODULE = "pdctl.sglang_cpu.serve"

# The SGLang release every adaptation was read and measured on; another release is judged by content
# (each adaptation checks the code it answers is still as expected) and refused where it is not.
CHECKED_RELEASE = "0.5.23"

# Exit code of a server refused by an adaptation's check (pdctl's "bad input": the install, not the topology).
REFUSED_EXIT = 2

# What every output of a run says when a CPU node serves a gpt-oss model (adaptation gpt-oss-sinks-ignored):
# the server logs it, launch/status/eval/parity print it and put it in their JSON (`numerics_note`).
NUMERICS_NOTE = ("gpt-oss on CPU: SGLang's torch-native attention ignores the attention sinks (pdctl adaptation "
                 "gpt-oss-sinks-ignored): KV layout and transfer are SGLang's, the numerics are not gpt-oss's")
