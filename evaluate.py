"""Evaluate: see `python evaluate.py --help` and the README."""
import sys

from globalpointer.cli import evaluate_main

if __name__ == "__main__":
    sys.exit(evaluate_main())
