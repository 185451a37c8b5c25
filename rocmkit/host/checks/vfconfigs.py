"""VF-named tuned configs (issue 5): on an SR-IOV VF host, SGLang needs them or runs untuned kernels."""

from __future__ import annotations

from pathlib import Path

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

REFERENCE = "sgl-project/sglang#3219"


@documents("software.vf_configs",
           what="on a VF host with SGLang: VF-named tuned configs present (`rocmkit vf-configs` fixes it)")
def check_vf_configs(f: Facts, ctx: Context):
    """On a host whose GPUs are VFs of a product SGLang keys configs for, with SGLang installed, the VF copies
    of the base product's configs must exist (the facts hold what `rocmkit vf-configs --dry-run` would create)."""
    vfs = sorted({d.product for d in f.devices if d.product and "sglang" in d.product.config_copies},
                 key=lambda p: p.name)
    if not vfs or f.process is None or not f.process.get("sglang_dir"):
        return
    names = ", ".join(p.name for p in vfs)
    sglang = f.process["sglang_dir"]
    would_create = f.process.get("sglang_vf_missing")
    if would_create is None:
        yield finding("software.vf_configs", "software", Status.SKIP,
                      f"{names} host: SGLang's configs were not examined in this capture", sglang=sglang)
        return
    from .. import vfconfigs  # here: only a VF host with SGLang pays for the copier's import

    # Only this host's VFs matter: copies for other products' VFs are harmless to lack. A name without a
    # readable device_name token is kept, so nothing unexpected is hidden.
    tokens = {vfconfigs.token(p.torch_name) for p in vfs}
    missing = [m for m in would_create if vfconfigs.device_token(Path(m).name) in tokens | {None}]
    if missing:
        yield finding("software.vf_configs", "software", Status.WARN,
                      f"{names} host: SGLang lacks {len(missing)} VF-named tuned config(s), so it runs untuned "
                      "kernels (slow, or Triton 'OutOfResources: shared memory')",
                      fix="rocmkit vf-configs", ref=REFERENCE, missing=missing[:20], sglang=sglang)
    else:
        yield finding("software.vf_configs", "software", Status.PASS,
                      f"{names} host: SGLang has its VF-named tuned configs", sglang=sglang)


CHECKS = [check_vf_configs]
