"""Predict: see `python predict.py --help` and the README."""
import sys

from globalpointer.cli import predict_main

if __name__ == "__main__":
    sys.exit(predict_main())
