"""rocmkit: provision AMD ROCm environments for RL post-training of language models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rocmkit")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
