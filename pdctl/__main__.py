"""`python -m pdctl` is the same as the `pdctl` console script."""

from pdctl.cli.main import main

if __name__ == "__main__":
    main()
