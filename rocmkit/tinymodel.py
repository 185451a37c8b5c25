"""A Qwen2-architecture model and byte-level BPE tokenizer generated locally and deterministically, so
certification needs no network and no model hub (research/smoke-grpo.md §4 lists the pitfalls avoided
here: Qwen2's own pre-tokenizer so AutoTokenizer reproduces the ids, a ChatML template, distinct pad and
eos tokens, head_dim 64).

The tokenizer covers every row of the model's output layer. verl's vLLM rollout masks the logits of ids at or
above len(tokenizer) (verl/workers/rollout/vllm_rollout/utils.py, monkey_patch_compute_logits) while the trainer's
softmax spans every row: a model with rows beyond its tokenizer is sampled from one distribution and trained on
another. The built-in model once padded 304 tokens to 384 rows, and every vLLM run's rollout log-probs sat
ln(384/304) = 0.23 nats above the trainer's (rollout_corr/kl 0.227 at step 1 on a CPU and an H100, 1e-5 with SGLang,
which masks nothing). So the built-in model has exactly as many rows as tokens, and a stand-in for a user's model
(build_from_config), whose rows are the real model's, gets a tokenizer filled up to them.

It is a top-level module because both tune (the built-in model's shape) and certify (its files, built in the
target) stand on it, and tune sits below certify."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

# Qwen2's pre-tokenization regex (tokenizer.json of Qwen2 models).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# name: (hidden, intermediate, layers, heads, kv heads) — "tiny" for CPU smoke runs, "0.5b" shaped like
# Qwen2.5-0.5B (896 hidden, 24 layers, 14/2 heads) for GPU benchmarks.
SIZES = {"tiny": (256, 512, 2, 4, 2), "0.5b": (896, 4864, 24, 14, 2)}
ARCHITECTURE = "Qwen2ForCausalLM"  # config.json's `architectures`, what an engine looks up
INIT_STD = 0.02  # Qwen2Config's initializer_range
# config.json's other fields, as transformers' Qwen2Config defaults them (a hub checkpoint's spelling: rope_theta,
# torch_dtype, which transformers 5 still reads)
QWEN2_DEFAULTS = {"attention_dropout": 0.0, "hidden_act": "silu", "max_window_layers": 28, "rms_norm_eps": 1e-06,
                  "rope_theta": 10000.0, "sliding_window": None, "torch_dtype": "float32", "use_cache": True,
                  "use_sliding_window": False}


def _corpus(seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    words = ["what", "is", "plus", "reply", "with", "digits", "only", "the", "answer", "number", "sum", "of", "and"]
    lines = []
    for _ in range(2000):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        lines.append(f"What is {a} plus {b}? {' '.join(rng.choices(words, k=6))} {a + b}.")
    return lines


def _tokenizer(seed: int, vocab: int):
    """The byte-level BPE tokenizer, trained on the digits corpus (the `tokenizers` package only)."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    return tok


def _filled(tok, rows: int):
    """The tokenizer with filler entries up to `rows` ids: plain vocabulary entries no merge produces (so no text
    encodes to them), lower-case letters only (so a sampled one never reads as a digit of the built-in task's
    answer); the decoder turns them into text like any token."""
    from tokenizers import Tokenizer

    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    i = 0
    while len(vocab) < rows:
        name, n = "", i
        while True:  # i in base 26, as letters
            name, n = chr(ord("a") + n % 26) + name, n // 26
            if not n:
                break
        vocab.setdefault(f"zz{name}", len(vocab))
        i += 1
    return Tokenizer.from_str(json.dumps(doc))


def _architecture(size: str, tokens: int) -> dict:
    """config.json's architecture fields for a tokenizer of `tokens` entries: one output row per token."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}")
    hidden, inter, layers, heads, kv = SIZES[size]
    return {"model_type": "qwen2", "vocab_size": tokens, "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "max_position_embeddings": 2048, "tie_word_embeddings": True}


@cache
def _tokens(seed: int, vocab: int) -> int:
    return _tokenizer(seed, vocab).get_vocab_size()


# Certificates made before the built-in model had one row per token (those without a `numerics` section) trained
# a model whose rows were padded to this multiple: rocmkit tune reads their shape as it was.
OLD_ROWS_MULTIPLE = 128


def config(size: str = "tiny", seed: int = 0, vocab: int = 512, padded: bool = False) -> dict:
    """The architecture fields of the config.json that build() writes, without torch or transformers (what
    `rocmkit tune`'s memory model reads for a certificate of the built-in model); `padded`: as the model was
    before it had one row per token."""
    fields = _architecture(size, _tokens(seed, vocab))
    if padded:
        fields["vocab_size"] = -(-fields["vocab_size"] // OLD_ROWS_MULTIPLE) * OLD_ROWS_MULTIPLE
    return fields


def _save_tokenizer(out_dir: Path, seed: int, vocab: int, max_length: int = 2048,
                    rows: int = 0) -> tuple[int, int, int]:
    """tokenizer.json and tokenizer_config.json as a model hub's checkpoints carry them, which every transformers
    release reads (4.x and 5.x write different files of their own); the `tokenizers` package only, so the built-in
    model's setup imports no transformers. `rows`: the model's output rows, which the tokenizer fills up to.
    Returns (tokens, eos id, pad id)."""
    from tokenizers import decoders

    tok = _tokenizer(seed, vocab)
    if rows > tok.get_vocab_size():
        tok = _filled(tok, rows)
    tok.decoder = decoders.ByteLevel()
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    eos, pad, extra = SPECIAL[2], SPECIAL[0], [SPECIAL[1]]
    added = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": True} for t in SPECIAL}
    doc = {"added_tokens_decoder": added, "additional_special_tokens": extra, "bos_token": None,
           "chat_template": CHATML, "clean_up_tokenization_spaces": False, "eos_token": eos,
           "model_max_length": max_length, "pad_token": pad, "padding_side": "left",
           "tokenizer_class": "PreTrainedTokenizerFast"}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(doc, indent=2) + "\n")
    special = {"additional_special_tokens": extra, "eos_token": eos, "pad_token": pad}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return tok.get_vocab_size(), tok.token_to_id(eos), tok.token_to_id(pad)


def _generation_config(out_dir: Path, eos: int, pad: int) -> None:
    (out_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "pad_token_id": pad}) + "\n")


def _weights(fields: dict, pad: int, seed: int) -> dict:
    """Qwen2ForCausalLM's state dict as transformers initialises it (`_init_weights`: linear weights and the
    embedding N(0, initializer_range), the padding token's embedding row and the biases zero, the RMSNorm weights
    one) and saves it (the output layer tied to the embedding, so not stored), fp32, deterministic for a seed."""
    import torch

    hidden, inter, heads, kv = (fields[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                                     "num_key_value_heads"))
    head_dim, std = hidden // heads, INIT_STD
    gen = torch.Generator().manual_seed(seed)

    def normal(*shape):
        return torch.empty(*shape).normal_(0.0, std, generator=gen)

    embed = normal(fields["vocab_size"], hidden)
    embed[pad].zero_()
    out = {"model.embed_tokens.weight": embed, "model.norm.weight": torch.ones(hidden)}
    for i in range(fields["num_hidden_layers"]):
        at = f"model.layers.{i}."
        out |= {at + "input_layernorm.weight": torch.ones(hidden),
                at + "post_attention_layernorm.weight": torch.ones(hidden),
                at + "self_attn.q_proj.weight": normal(heads * head_dim, hidden),
                at + "self_attn.q_proj.bias": torch.zeros(heads * head_dim),
                at + "self_attn.k_proj.weight": normal(kv * head_dim, hidden),
                at + "self_attn.k_proj.bias": torch.zeros(kv * head_dim),
                at + "self_attn.v_proj.weight": normal(kv * head_dim, hidden),
                at + "self_attn.v_proj.bias": torch.zeros(kv * head_dim),
                at + "self_attn.o_proj.weight": normal(hidden, heads * head_dim),
                at + "mlp.gate_proj.weight": normal(inter, hidden),
                at + "mlp.up_proj.weight": normal(inter, hidden),
                at + "mlp.down_proj.weight": normal(hidden, inter)}
    return out


def build(out_dir: Path, size: str = "tiny", seed: int = 0, vocab: int = 512) -> Path:
    """Write tokenizer + config + random weights to out_dir (deterministic for a seed), in the files a model hub's
    Qwen2 checkpoint has, with torch, `tokenizers` and `safetensors` only: importing transformers cost a GPU host 7 s
    of certify's setup."""
    from safetensors.torch import save_file

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}")
    out_dir = Path(out_dir)
    tokens, eos, pad = _save_tokenizer(out_dir, seed, vocab)
    fields = _architecture(size, tokens)
    doc = {"architectures": [ARCHITECTURE], **fields, **QWEN2_DEFAULTS, "bos_token_id": None, "eos_token_id": eos,
           "pad_token_id": pad, "initializer_range": INIT_STD}
    (out_dir / "config.json").write_text(json.dumps(dict(sorted(doc.items())), indent=2) + "\n")
    save_file(_weights(fields, pad, seed), str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    _generation_config(out_dir, eos, pad)
    return out_dir


def build_from_config(out_dir: Path, config: dict, seed: int = 0, vocab: int = 512) -> Path:
    """A random-weight model of a real model's shape (its config.json), with the built-in tokenizer: memory,
    parallel layout and speed depend on the shape, not the weights. The vocabulary keeps the real size (the
    embeddings are the real model's); the tokenizer is filled up to it (the module's docstring says why). Weights in the config's dtype
    (bf16 for the models rocmkit knows), as the real checkpoint is stored."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out_dir = Path(out_dir)
    fields = {k: v for k, v in config.items() if k not in ("model_type", "_name_or_path")}
    _, eos, pad = _save_tokenizer(out_dir, seed, vocab, max_length=int(config.get("max_position_embeddings") or 2048),
                                  rows=int(config.get("vocab_size") or 0))
    fields.update(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    cfg = AutoConfig.for_model(config["model_type"], **fields)
    dtype = getattr(torch, str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), torch.bfloat16)
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # made in its dtype: a 7B model in fp32 would need twice the memory to build
    # drawn on a GPU where there is one: a Qwen3-4B's random init took 154 s on an H200 host's CPU (16 cores)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    try:
        with device:
            model = AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(out_dir)
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the setup's process ends next; nothing of it stays on the GPU the run needs
    _generation_config(out_dir, eos, pad)
    return out_dir
