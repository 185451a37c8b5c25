"""rocmkit: provision AMD ROCm environments for RL post-training of language models."""


def __getattr__(name: str):
    # Read on first use: importlib.metadata costs more than the doctor's whole level-1 run reads.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("rocmkit")
        except PackageNotFoundError:  # running from a source tree that was never installed
            return "0.0.0+source"
    raise AttributeError(f"module 'rocmkit' has no attribute {name!r}")
