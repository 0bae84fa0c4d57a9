"""cpdagthink: the reproducible companion to 'Externalized CPDAG Summaries Improve LLM Causal Deduction'."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cpdagthink")
except PackageNotFoundError:  # a source tree on sys.path that pip has not installed
    __version__ = "0+unknown"
