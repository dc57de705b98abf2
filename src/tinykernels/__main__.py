"""``python -m tinykernels``: see :mod:`tinykernels.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
