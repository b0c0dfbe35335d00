"""`python -m modsenc.cli ...` (as torchrun launches it): the same as the ``modsenc`` script."""

import sys

from modsenc.cli import main

if __name__ == "__main__":
    sys.exit(main())
