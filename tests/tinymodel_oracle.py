"""Writes the built-in model twice, for tests/test_tinymodel_files.py, in a Python that has transformers: with
rocmkit's writer (rocmkit/tinymodel.py, no transformers) and the way transformers itself saves a model
and tokenizer (`save_pretrained`, what rocmkit did before), then loads both with transformers' Auto classes and
prints one JSON document of what each loads as: the config, the tokenizer's behaviour on sample text and the chat
template, and the weights' names, shapes and initial values.

  python tinymodel_oracle.py FOLDER SIZE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from rocmkit import tinymodel


def with_transformers(out: Path, size: str, seed: int = 0, vocab: int = 512) -> None:
    """The built-in model as transformers writes it (save_pretrained of its own classes)."""
    from tokenizers import decoders

    tok = tinymodel._tokenizer(seed, vocab)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"], padding_side="left",
                                   model_max_length=2048)
    fast.chat_template = tinymodel.CHATML
    fast.save_pretrained(out)
    fields = tinymodel._architecture(size, len(fast))
    del fields["model_type"]
    cfg = Qwen2Config(**fields, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None)
    cfg.architectures = [tinymodel.ARCHITECTURE]
    torch.manual_seed(seed)
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    GenerationConfig(eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id).save_pretrained(out)


def kind(t: torch.Tensor) -> dict:
    """What a tensor's initial values are: all ones, all zeros, or drawn (mean, std), and its all-zero rows."""
    t = t.float()
    if bool((t == 1).all()):
        return {"values": "ones"}
    if bool((t == 0).all()):
        return {"values": "zeros"}
    zero_rows = [i for i in range(t.shape[0]) if bool((t[i] == 0).all())] if t.dim() == 2 else []
    return {"values": "drawn", "mean": round(t.mean().item(), 3), "std": round(t.std().item(), 3),
            "zero_rows": zero_rows}


def describe(folder: Path) -> dict:
    config = AutoConfig.from_pretrained(folder).to_dict()
    for key in ("transformers_version", "_name_or_path"):
        config.pop(key, None)
    tok = AutoTokenizer.from_pretrained(folder)
    texts = ["What is 12 plus 30? reply with digits only", "the answer 42.\n", "<|im_start|>user\nhi<|im_end|>"]
    chat = [{"role": "user", "content": "What is 1 plus 2?"}]
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    state = model.state_dict()
    return {
        "config": config,
        "tokenizer": {"class": type(tok).__name__, "eos": tok.eos_token_id, "pad": tok.pad_token_id,
                      "bos": tok.bos_token_id, "padding_side": tok.padding_side, "max": tok.model_max_length,
                      "special": sorted(tok.all_special_tokens), "size": len(tok),
                      "ids": [tok(t)["input_ids"] for t in texts],
                      "decoded": [tok.decode(tok(t)["input_ids"]) for t in texts],
                      "chat": tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True),
                      "batch": tok(texts, padding=True)["attention_mask"]},
        "generation": GenerationConfig.from_pretrained(folder).to_diff_dict(),
        "loading": {k: sorted(map(str, v)) for k, v in info.items() if k != "error_msgs"},
        "tied": model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
        "weights": {k: {"shape": list(v.shape), "dtype": str(v.dtype), **kind(v)} for k, v in state.items()},
    }


def main(folder: str, size: str) -> None:
    root = Path(folder)
    with_transformers(root / "transformers", size)
    tinymodel.build(root / "rocmkit", size=size)
    doc = {"version": transformers.__version__, "files": {}}
    for name in ("transformers", "rocmkit"):
        doc[name] = describe(root / name)
        doc["files"][name] = sorted(p.name for p in (root / name).iterdir())
    print(json.dumps(doc))


if __name__ == "__main__":
    main(*sys.argv[1:])
