"""`rocmkit tune`: verl settings for a model on a set of GPUs, each with its reason.

models (the model's config facts: a built-in table or a config.json), memory (the memory model: pure
arithmetic), plan (the decisions, each a verl override with a reason and a source). Standard library only,
so the memory model also runs where only torch is installed (benchmarks/tune_memory.py on a GPU machine).
"""
