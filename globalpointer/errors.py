"""Errors meant for the person running the command: the scripts print the message, not a trace."""


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
