"""What counts as the user's mistake rather than vcbench's.

A `UserError` is bad input: a config key or value, a missing, unreadable or corrupt file, data
that does not fit. Every command line prints it as one line naming the key or file and what was
expected (`launch/cli.py`), with the traceback behind `--verbose`; anything else is a bug in
vcbench and keeps its traceback. The specific errors subclass it together with the built-in
type callers already catch (ValueError, KeyError, FileNotFoundError).
"""


class UserError(Exception):
  """Bad input from the user; its message alone says what to fix."""


# Built-in errors that are the user's when they reach the top of a command: a path that does
# not exist, cannot be read or written, or is a directory where a file was expected.
USER_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
                  FileExistsError)


class CheckpointError(UserError, ValueError):
  """A checkpoint file that cannot be read (or must not be)."""
