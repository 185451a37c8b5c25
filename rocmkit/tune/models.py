"""A model's architecture facts, read from its config.json (a local directory or file) or from rocmkit's
table of the models people post-train (resources/models.toml, each entry with its source)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from ..errors import UsageError

# verl's performance tuning guide: sequence packing (use_remove_padding) is tested for these model types.
REMOVE_PADDING_TYPES = ("llama", "mistral", "gemma", "gemma2", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    attention_bias: bool = False
    qk_norm: bool = False
    experts: int = 0  # MoE: routed experts per layer (0: dense)
    experts_per_token: int = 0
    moe_intermediate: int = 0
    source: str = ""
    max_positions: int | None = None  # config.json's max_position_embeddings: the longest sequence it was built for

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        h = self.hidden
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        attn += (self.q_dim + 2 * self.kv_dim) if self.attention_bias else 0
        attn += 2 * self.head_dim if self.qk_norm else 0
        if self.experts:
            mlp = self.experts * 3 * h * self.moe_intermediate + h * self.experts
        else:
            mlp = 3 * h * self.intermediate
        return attn + mlp + 2 * h

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: only its experts)."""
        if not self.experts:
            return self.params
        idle = (self.experts - self.experts_per_token) * 3 * self.hidden * self.moe_intermediate
        return self.params - self.layers * idle

    @property
    def largest_tensor(self) -> int:
        """Elements of the model's largest parameter tensor: the embedding, an MLP projection, or with MoE the
        packed experts (Transformers 5 keeps gate and up of every expert in one [experts, 2 x intermediate,
        hidden] tensor, as verl 0.9.1's unfuse_moe_params describes)."""
        h = self.hidden
        mlp = self.experts * 2 * self.moe_intermediate * h if self.experts else h * self.intermediate
        return max(self.vocab * h, self.q_dim * h, mlp)

    def lora_linears(self) -> list[tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer that LoRA adapts with peft's target_modules
        "all-linear" (verl's default: every nn.Linear but the output layer): q, k, v, o and the gated MLP's three.
        Dense models only (an MoE's experts are not nn.Linear in every implementation)."""
        h, i = self.hidden, self.intermediate
        return [(h, self.q_dim), (h, self.kv_dim), (h, self.kv_dim), (self.q_dim, h), (h, i), (h, i), (i, h)]

    def lora_params(self, rank: int) -> int:
        """Parameters LoRA of this rank adds (A: rank x in, B: out x rank, for every adapted linear)."""
        return self.layers * sum(rank * (a + b) for a, b in self.lora_linears())

    @property
    def kv_bytes_per_token(self) -> int:
        """The rollout engine's KV cache: 2 (K and V) x layers x kv_heads x head_dim x 2 bytes (bf16)."""
        return 2 * self.layers * self.kv_dim * 2

    @property
    def remove_padding(self) -> bool:
        return self.model_type in REMOVE_PADDING_TYPES


def from_config(config: dict, name: str, source: str) -> ModelSpec:
    """A spec from config.json's fields; a missing or wrong field is a UsageError naming it."""
    missing = [k for k in REQUIRED if not isinstance(config.get(k), int)]
    if config.get("num_experts") or config.get("num_local_experts"):
        missing = [k for k in missing if k != "intermediate_size"]
    if missing:
        raise UsageError(f"{source}: config.json field(s) {', '.join(missing)} missing or not integers",
                         hint="give the model's Hugging Face config.json (or the directory holding it)")
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    experts = int(config.get("num_experts") or config.get("num_local_experts") or 0)
    model_type = str(config.get("model_type", "unknown"))
    return ModelSpec(
        name=name, model_type=model_type, hidden=config["hidden_size"],
        intermediate=int(config.get("intermediate_size") or 0), layers=config["num_hidden_layers"], heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads), head_dim=int(head_dim), vocab=config["vocab_size"],
        tied=bool(config.get("tie_word_embeddings", False)),
        # Qwen2/2.5 projections carry q/k/v biases; their config has no field for it.
        attention_bias=bool(config.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
        qk_norm=model_type in ("qwen3", "qwen3_moe"), experts=experts,
        experts_per_token=int(config.get("num_experts_per_tok") or 0),
        moe_intermediate=int(config.get("moe_intermediate_size") or config.get("intermediate_size") or 0)
        if experts else 0, source=source,
        max_positions=config["max_position_embeddings"] if isinstance(config.get("max_position_embeddings"), int)
        else None)


@cache
def table() -> dict[str, dict]:
    with resources.files("rocmkit.resources").joinpath("models.toml").open("rb") as f:
        return tomllib.load(f)


def lookup(name: str) -> ModelSpec:
    """A model by local path (a directory with config.json, or the file) or by a name of the table: the
    Hugging Face id or its last part, any case."""
    path = Path(name).expanduser()
    if path.is_dir() or name.endswith(".json"):
        file = path / "config.json" if path.is_dir() else path
        try:
            config = json.loads(file.read_text())
        except OSError as exc:
            raise UsageError(f"{file}: cannot read ({exc.strerror})") from None
        except ValueError as exc:
            raise UsageError(f"{file}: not JSON ({exc})") from None
        if not isinstance(config, dict):
            raise UsageError(f"{file}: not a config.json (a JSON object)")
        return from_config(config, str(path), str(file))
    wanted = name.strip().lower()
    for key, entry in table().items():
        if wanted in (key.lower(), key.split("/")[-1].lower()):
            return from_config(entry, key, entry.get("source", "rocmkit's model table"))
    import difflib

    names = {key.split("/")[-1].lower(): key for key in table()}
    short = wanted.split("/")[-1]
    near = [k for n, k in names.items() if n.startswith(short)][:3]  # the name with a suffix left off (-Instruct)
    near += [names[n] for n in difflib.get_close_matches(short, list(names), n=3, cutoff=0.6)
             if names[n] not in near][:3 - len(near)]
    raise UsageError(f"--model {name}: no such directory or config.json, and not in rocmkit's model table",
                     hint=(f"did you mean {', '.join(near)}? " if near else "") + "`rocmkit tune --list-models` lists "
                          "the table; or give a directory holding config.json")
