"""One root for every error this package raises on purpose, so the command line catches them once."""


class CpdagthinkError(Exception):
    """An error with a message meant for the user: bad input, unreachable model, a folder of another run."""
