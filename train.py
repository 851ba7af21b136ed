"""Train: see `python train.py --help` and the README."""
import sys

from globalpointer.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main())
