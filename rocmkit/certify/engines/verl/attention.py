"""Which attention implementation verl's actor and reference load the model with (`certify --attn`).

verl 0.9.1 asks transformers for flash_attention_2 unless told otherwise (verl/workers/config/model.py:185,
`override_config.get("attn_implementation", "flash_attention_2")`), and a target without a working flash-attn
then dies when the first worker loads the model, minutes into the run. So the setup looks inside the target:
`probe()` imports flash_attn there and, where it imports, asks transformers whether it would dispatch to it;
`choose()` (pure) turns what was asked and what was found into the implementation, and why; `refusal()` (pure) is
the error for an explicit choice the target cannot run. The host reads the choice from the setup's report.
"""

from __future__ import annotations

AUTO, FA2, SDPA = "auto", "flash_attention_2", "sdpa"
CHOICES = (AUTO, FA2, SDPA)


def probe(gpus: int) -> dict:
    """In the target, after torch is imported: can flash_attention_2 run here? Imports flash_attn (its varlen
    kernel is what verl's remove-padding path calls) and asks transformers, whose own check also wants a GPU."""
    doc: dict = {"flash_attn": None, "error": None, "transformers_fa2": None}
    try:
        import flash_attn
        from flash_attn import flash_attn_varlen_func  # noqa: F401 - the import is the check

        doc["flash_attn"] = getattr(flash_attn, "__version__", "?")
    except Exception as exc:  # noqa: BLE001 - any failure (absent, wrong arch, ABI) means it cannot run
        doc["error"] = f"{type(exc).__name__}: {exc}"[:300]
        doc["usable"] = False
        return doc  # transformers' answer changes nothing then, and importing it cost a GPU host 3 s of the setup
    try:
        from transformers.utils import is_flash_attn_2_available

        doc["transformers_fa2"] = bool(is_flash_attn_2_available())
    except Exception as exc:  # noqa: BLE001
        doc["transformers_fa2"] = False
        doc["error"] = doc["error"] or f"transformers: {type(exc).__name__}: {exc}"[:300]
    doc["usable"] = bool(gpus and doc["flash_attn"] and doc["transformers_fa2"])
    if doc["flash_attn"] and not doc["usable"]:
        doc["error"] = doc["error"] or ("no GPU: flash-attention runs on GPUs only" if not gpus
                                        else "transformers says flash_attention_2 is not available here")
    return doc


def choose(asked: str, on_cpu: bool, found: dict | None) -> dict:
    """{"asked", "chosen", "why"}: auto takes flash_attention_2 where it runs, otherwise SDPA (always on the CPU).
    An explicit choice is kept as asked; refusal() says whether the target can run it. Pure."""
    if asked not in CHOICES:
        raise ValueError(f"attention {asked!r}: one of {', '.join(CHOICES)}")
    if asked != AUTO:
        return {"asked": asked, "chosen": asked, "why": "asked"}
    if on_cpu:
        return {"asked": asked, "chosen": SDPA, "why": "auto: the CPU runs SDPA"}
    if found is None:
        return {"asked": asked, "chosen": SDPA, "why": "auto: the target did not report flash_attn"}
    if found.get("usable"):
        return {"asked": asked, "chosen": FA2, "why": f"auto: flash_attn {found['flash_attn']} imports"}
    return {"asked": asked, "chosen": SDPA, "why": f"auto: flash_attn cannot run here ({found.get('error')})"}


def refusal(choice: dict, found: dict | None) -> tuple[str, str] | None:
    """(message, hint) when flash_attention_2 was asked for by name and the target cannot run it. Pure."""
    if choice["chosen"] != FA2 or choice["why"] != "asked" or (found or {}).get("usable"):
        return None
    said = (found or {}).get("error") or "the target did not report flash_attn"
    return (f"--attn flash_attention_2: flash_attn cannot run in the target ({said})",
            "install a flash-attn built for this GPU and torch in the target (the verl stacks build it), "
            "or use --attn auto or --attn sdpa")
