"""The one error type of reports/: input a report cannot use, with the file named."""


class InputError(Exception):
    """Bad input (missing, empty, malformed, not the expected format): printed as one line, exit code 2."""
