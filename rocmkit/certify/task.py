"""The built-in task: a reward a tiny randomly initialised policy can learn within a smoke budget.

Prompts ask for a sum written in digits; the reward is the share of the answer's characters that are
digits, plus a bonus when the answer is exactly the sum. A random policy emits a mix of characters, so
rewards vary within each GRPO group from the first step (the learning signal), and pushing up the digit
share is learnable in about ten steps. Data is stored in verl's GSM8K row format, so verl's dataset code
reads it unchanged; `compute_score` has the signature of verl's custom reward functions, and this file is
what verl loads as `reward.custom_reward_function.path`.
"""

from __future__ import annotations

import random
from pathlib import Path

DATA_SOURCE = "rocmkit/digits"
INSTRUCTION = "Reply with digits only."


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """Share of non-space characters that are digits, +1 if the answer is exactly the ground truth."""
    text = "".join(str(solution_str).split())
    if not text:
        return 0.0
    share = sum(ch.isdigit() for ch in text) / len(text)
    return share + (1.0 if text == str(ground_truth) else 0.0)


def rows(n: int, split: str, seed: int) -> list[dict]:
    """GSM8K-format rows (data_source, prompt, ability, reward_model.ground_truth, extra_info)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        question = f"What is {a} plus {b}?"
        out.append({
            "data_source": DATA_SOURCE,
            "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {"split": split, "index": i, "answer": f"{a} + {b} = {a + b} #### {a + b}",
                           "question": question},
        })
    return out


def write_parquet(path: Path, data: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(data), path)
    return path


def write_dataset(out_dir: Path, train_rows: int = 256, test_rows: int = 16, seed: int = 0) -> tuple[Path, Path]:
    return (write_parquet(Path(out_dir) / "train.parquet", rows(train_rows, "train", seed)),
            write_parquet(Path(out_dir) / "test.parquet", rows(test_rows, "test", seed + 1)))
