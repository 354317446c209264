"""Which optional extra of pdctl provides a third-party module, so that a command run on a CLI-only install
(`pip install pdctl`, no extras) says what to install (exit 2) instead of ending in a ModuleNotFoundError.

The extras are those of pyproject.toml: `engine` (the CPU reference engine, transfer backends, bench-transfer),
`eval` (datasets for GSM8K from the Hub, matplotlib for parity's report), `suggest` (AIConfigurator and its
pandas, for `pdctl suggest`) and `kubernetes` (the Kubernetes client and kubernetes-validate, for
`launch --executor kubernetes`).
"""

from __future__ import annotations

from pdctl.errors import UserError
from pdctl.transfer.registry import BACKENDS

# top-level module -> extra that installs it
MODULE_EXTRAS: dict[str, str] = {
    "torch": "engine",
    "numpy": "engine",
    "safetensors": "engine",
    "fastapi": "engine",
    "starlette": "engine",
    "uvicorn": "engine",
    "sglang_router": "engine",
    "datasets": "eval",
    "matplotlib": "eval",
    "aiconfigurator": "suggest",
    "pandas": "suggest",
    # `launch --executor kubernetes`: the client, and the offline validation of the manifests (kubernetes-validate
    # and its jsonschema)
    "kubernetes": "kubernetes",
    "kubernetes_validate": "kubernetes",
    "jsonschema": "kubernetes",
    # the transfer backends' libraries (pdctl.transfer.registry)
    **{module: b.extra for b in BACKENDS.values() for module in (*b.native_modules, b.name)},
}

# pdctl's own processes (`python -m MODULE`) -> the third-party modules they import
PROCESS_NEEDS: dict[str, tuple[str, ...]] = {
    "pdctl.reference": ("torch", "numpy", "safetensors", "fastapi", "uvicorn"),
    "sglang_router.launch_router": ("sglang_router",),
}

INSTALL_HINT = {
    "engine": "pip install 'pdctl[engine]' (install the CPU torch first: pip install torch==2.13.0), or `make install`",
    "eval": "pip install 'pdctl[eval]', or `make install`",
    "suggest": "pip install 'pdctl[suggest]' (Python >= 3.11), or `make install`",
    "kubernetes": "pip install 'pdctl[kubernetes]', or `make install`",
}


def extra_for(module: str | None) -> str | None:
    """The extra that provides MODULE (a dotted name is looked up by its top-level package), if any."""
    if not module:
        return None
    return MODULE_EXTRAS.get(module.split(".")[0])


def missing_module_error(exc: ModuleNotFoundError, what: str = "this command") -> UserError | None:
    """A UserError saying which extra to install for EXC's module, or None when no extra provides it."""
    extra = extra_for(exc.name)
    if extra is None:
        return None
    return UserError(f"{what} needs the '{extra}' extra of pdctl ({exc.name} is not installed)",
                     detail=f"install it: {INSTALL_HINT[extra]}")


def first_missing(modules: tuple[str, ...] | list[str], what: str) -> UserError | None:
    """The UserError of the first of MODULES that cannot be imported here (naming its extra), or None."""
    import importlib.util

    for module in modules:
        if importlib.util.find_spec(module) is None:
            error = missing_module_error(ModuleNotFoundError(name=module), what)
            return error or UserError(f"{what} needs the Python module {module}, which is not installed")
    return None


def require(*modules: str, what: str) -> None:
    """Raise the UserError of the first of MODULES that cannot be imported (check BEFORE doing any work,
    e.g. before creating an output directory)."""
    error = first_missing(modules, what)
    if error is not None:
        raise error


def missing_for_process(argv: list[str], what: str) -> UserError | None:
    """For `PYTHON -m MODULE ...` (ARGV) run with THIS interpreter: the UserError naming the extra to install
    when a module it imports is missing here; None when it can run (or is not one of pdctl's processes)."""
    import sys

    if argv[:2] != [sys.executable, "-m"] or len(argv) < 3:
        return None
    return first_missing(PROCESS_NEEDS.get(argv[2], ()), what)
