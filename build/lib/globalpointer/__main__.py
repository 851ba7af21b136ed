"""``python -m globalpointer COMMAND ...``: the same commands as the ``globalpointer`` console script."""
import sys

from .cli import main

sys.exit(main())
