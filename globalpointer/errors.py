"""Errors and log lines meant for the person running a command: the commands print an error's
message, not a trace."""
import logging
import sys


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)



class UserError(Exception):
    """Something the user can fix; the message says what and where."""


class ConfigError(UserError):
    pass


class DataError(UserError):
    pass


class EncoderError(UserError):
    pass


class CheckpointError(UserError):
    pass


class TrainingError(UserError):
    """Training cannot go on (it diverged); the message says what to change."""
