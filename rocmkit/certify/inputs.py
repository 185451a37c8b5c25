"""The user's --model and --data, checked in the setup before any engine starts: a weights file cut short (a copy or
download that stopped) or a data file without the columns the run reads fails minutes later inside a Ray worker,
under two wrappers; here it is named in seconds with the file and what is wrong. Runs in the target (its Python has
pyarrow); the weights check needs nothing but Python.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming each tensor's
`data_offsets` [begin, end) in the data that follows, then the data
(https://github.com/huggingface/safetensors#format): the file is whole when it holds 8 + N + the largest end."""

from __future__ import annotations

import json
import struct
from pathlib import Path

# The columns both engines read from a --data file: verl's RLHFDataset (data.prompt_key "prompt") and its reward
# loop (data_source, reward_model.ground_truth), and rocmkit's TRL run (trl_run.py), which reads the same.
COLUMNS = ("prompt", "data_source", "reward_model")
MAX_HEADER = 100 << 20  # safetensors itself refuses larger headers (HeaderTooLarge)


def safetensors_problem(path: Path) -> str | None:
    """Why this safetensors file cannot load, or None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path}: {size} bytes, shorter than a safetensors header: the file was cut short"
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                return (f"{path}: its header says {n} bytes of metadata but the file has {size} bytes in all: "
                        "the file was cut short or is not a safetensors file")
            header = json.loads(f.read(n))
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    except ValueError:
        return f"{path}: its header is not the JSON safetensors writes: the file is damaged"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
               and "data_offsets" in t), default=0)
    if 8 + n + end > size:
        return (f"{path}: {size} bytes, but its tensors need {8 + n + end}: the file was cut short "
                f"({100 * size / (8 + n + end):.0f} % of it is there)")
    return None


def model_problems(model_dir: Path) -> list[str]:
    """The weights files of a Hugging Face model folder that cannot load: each shard an index names must exist,
    and every safetensors file must be whole."""
    out = []
    for index in sorted(model_dir.glob("*.safetensors.index.json")):
        try:
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        except (OSError, ValueError) as exc:
            out.append(f"{index}: not readable as JSON ({exc})")
            continue
        out += [f"{index} names {s}, which is not in {model_dir}" for s in sorted(shards)
                if not (model_dir / s).is_file()]
    for f in sorted(model_dir.glob("*.safetensors")):
        why = safetensors_problem(f)
        if why:
            out.append(why)
    return out


def data_problems(path: Path, columns: tuple[str, ...] = COLUMNS) -> list[str]:
    """What is wrong with a --data parquet file for the run: not readable as parquet, or a column it lacks."""
    try:
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    except ImportError:
        return []  # the engine's own loader says it then
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a file that is not parquet
        return [f"{path}: not readable as parquet ({type(exc).__name__}: {str(exc)[:200]})"]
    missing = [c for c in columns if c not in names]
    if missing:
        return [f"{path} has no column {', '.join(repr(c) for c in missing)} (its columns: {', '.join(names)}); "
                f"the run reads {', '.join(columns)}"]
    return []


def problems(cfg: dict) -> list[str]:
    """The setup's check of certify.json's user inputs (the built-in ones are made by the setup itself)."""
    out = []
    if not cfg.get("builtin_model"):
        out += model_problems(Path(cfg["model_dir"]))
    if not cfg.get("builtin_data"):
        columns = tuple(cfg.get("data_columns") or COLUMNS)  # a job's: its own data.prompt_key and reward_fn_key
        for f in cfg.get("data_files") or [cfg["train_file"]]:
            out += data_problems(Path(f), columns)
    return out
