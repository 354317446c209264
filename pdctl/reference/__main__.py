"""`python -m pdctl.reference --model-path DIR ...`: run the reference engine server.

Flags and the checkpoint's config are checked before torch/fastapi are imported, so bad input fails fast
with a message and exit code 2.
"""

import sys

from pdctl.errors import PdctlError
from pdctl.reference.args import parse_args
from pdctl.reference.config import load_config, validate_tp


def main() -> int:
    """Validate cheaply, then serve."""
    args = parse_args(sys.argv[1:])
    try:
        validate_tp(load_config(args.model_path), args.tp)
    except PdctlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    from pdctl.reference.server import main as serve_main  # lazy: torch and fastapi, after the cheap checks

    return serve_main(sys.argv[1:])


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)
