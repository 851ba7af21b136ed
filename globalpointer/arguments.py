"""Argument types shared by the commands' parsers: a bad value is refused by argparse, naming the flag."""
import argparse
from typing import Callable


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    return parse
