"""The one place that decides how a pdctl process ends: used by entry points only, never by library code.

Why it exists: the NIXL 1.5.1 wheels crash (SIGSEGV) in their native destructors at interpreter exit once an
agent was created in the process (closed or not) on hosts with RDMA verbs providers installed — as GPU
clusters have (measured here with Debian's ibverbs-providers installed: 12 of 12 such exits crashed; without
them: 0 of 12) — and Mooncake's engine takes seconds to tear down; a server would then report -11 and a CLI
would lose its exit code. So an entry point (`pdctl`'s main, `python -m
pdctl.reference`, the bench-transfer peer) runs its main function through `run_and_exit`, which

- takes the exit code from the function's return value, from a raised `SystemExit` (as Python itself does:
  None -> 0, an int -> itself, anything else is printed and gives 1), from KeyboardInterrupt (130) or from
  any other exception (its traceback is printed, 1);
- ends the process normally (`sys.exit`) unless a native transfer library was loaded, in which case it runs
  the atexit handlers, flushes logging and stdio and ends with `os._exit(code)`, skipping the destructors.

Importing pdctl changes nothing about how a process ends: no hook is installed on import. pytest sessions get
the same policy from pdctl's pytest11 plugin (pdctl/pytest_plugin.py), which keeps pytest's own exit status.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from pdctl.transfer.registry import NATIVE_MODULES

# Modules whose native destructors may crash or hang at interpreter exit: the transfer backends' libraries.
NATIVE_TRANSFER_MODULES = NATIVE_MODULES


def exit_code(code: object) -> int:
    """The process exit code Python gives `sys.exit(code)` (printing a non-int, non-None code to stderr)."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF  # as the OS reports it: 256 -> 0, -1 -> 255
    print(code, file=sys.stderr)
    return 1


def call_main(main: Callable[[], object]) -> int:
    """Run MAIN and return the exit code it means, whichever way it ended."""
    try:
        return exit_code(main())
    except SystemExit as exc:
        return exit_code(exc.code)
    except KeyboardInterrupt:
        return 130
    except BaseException:  # noqa: BLE001 - an entry point reports every crash as exit 1 with its traceback
        traceback.print_exc()
        return 1


def native_transfer_loaded() -> bool:
    """True when a transfer library with crash-prone native destructors is loaded in this process."""
    return any(name in sys.modules for name in NATIVE_TRANSFER_MODULES)


def exit_process(code: int) -> NoReturn:
    """End the process with CODE; with a native transfer library loaded, without its destructors."""
    if not native_transfer_loaded():
        sys.exit(code)
    try:
        atexit._run_exitfuncs()  # what a normal exit would run (our own cleanups, temp dirs)
    except BaseException:  # noqa: BLE001, S110 - a failing cleanup must not change the exit code
        pass
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed stream must not block the exit
            pass
    os._exit(code)


def run_and_exit(main: Callable[[], object]) -> NoReturn:
    """The body of an entry point: run MAIN, then end the process with the code it means."""
    exit_process(call_main(main))


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux prctl PR_SET_PDEATHSIG).

    For helper processes a pdctl command starts in their own session (so that a Ctrl-C aimed at the
    terminal does not hit them half-way): if pdctl itself is killed (SIGTERM/SIGKILL, no cleanup runs),
    they must not live on as orphans doing work nobody waits for."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the helper still ends at EOF on its stdin
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
