"""What each GPU probe of `rocmkit doctor --level 2` measures and what it is judged against, declared once
beside the probes: the manual's table of probes is made from it (tests/doc_tables.py), and a test holds every
id the probes produce to it, as `checks.documents` does for the level-1 checks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    ids: tuple[str, ...]  # the finding ids (the first part is verdict.AREA)
    measured: str  # what is measured, how (markdown)
    judged: str  # what the figure is judged against (markdown)


PROBES: tuple[Probe, ...] = (
    Probe(('probe.gemm.bf16',),
          '8192³ bf16 `torch.mm` on random data, TFLOP/s',
          'dense bf16 peak'),
    Probe(('probe.gemm.fp8',),
          "8192³ `torch._scaled_mm` in the arch's fp8 (`float8_e4m3fnuz` on gfx942, `float8_e4m3fn` on gfx950 "
          'and sm90), bf16 out',
          'dense fp8 peak; skipped where the arch has no fp8'),
    Probe(('probe.hbm',),
          "1 GiB device-to-device copy, bytes read + written (BabelStream's Copy), GB/s",
          'HBM peak'),
    Probe(('probe.h2d', 'probe.d2h'),
          '256 MiB copies from and to pinned host memory',
          'host link peak per direction (`pcie_gbps`; Gen5 x16 = 63.0 GB/s)'),
    Probe(('probe.allreduce',),
          '1 GiB float32 all-reduce, one spawned process per GPU, `torch.distributed` over NCCL (RCCL on ROCm);'
          ' the first sum is checked; bus bandwidth = algbw × 2(n−1)/n as nccl-tests/rccl-tests',
          'links: xGMI is a mesh, so n GPUs use n−1 links of 64 GB/s (MI300X/MI325X) or 76.8 GB/s '
          '(MI350X/MI355X) per direction; NVSwitch gives every GPU all 18 NVLink links (450 GB/s)'),
    Probe(('probe.p2p',),
          '256 MiB device-to-device copy for every ordered GPU pair (`dst.copy_(src)`, peer-to-peer where '
          'allowed), event-timed, one direction, GB/s',
          "the pair's link budget: one xGMI link in a mesh (`link_gbps`), every NVLink through NVSwitch "
          '(`link_count × link_gbps`), × the arch\'s `p2p` fraction; the title names the slow pair(s) ("one slow'
          ' link" when the others are fine)'),
    Probe(('probe.megatron',),
          'a small GPT (2 layers, hidden 256, 8 heads, vocab 1024, 128 tokens × 4) built through megatron-core '
          '— TransformerEngine layers (`get_gpt_layer_with_transformer_engine_spec`) when transformer_engine is'
          " installed, megatron-core's local layers (`get_gpt_layer_local_spec`) otherwise — trained 8 Adam "
          'steps in bf16 on one fixed batch with TP over the first one or two GPUs, one spawned process per GPU'
          ' (`torch.distributed`, NCCL/RCCL), in a fresh process',
          'pass when every loss is finite and the last is below 90 % of the first (a healthy model memorises '
          "the batch); fail on an error (the first failing rank's, e.g. a TE kernel that will not launch), a "
          'NaN/inf or a loss that does not fall; skip, saying so, when megatron-core is not installed'),
    Probe(('probe.vram_release',),
          'in a fresh process with `PYTORCH_CUDA_ALLOC_CONF`/`PYTORCH_HIP_ALLOC_CONF=expandable_segments:True`:'
          " take 65 % of GPU 0's free memory in 1 GiB tensors, touch, free, `empty_cache()`, read free memory, "
          '3 cycles; then, when torch_memory_saver is installed, its `region()`/`pause()`/`resume()` 3 times '
          '(default allocator: it refuses expandable segments)',
          'pass when ≥ 95 % of what was taken comes back every cycle, warn from 80 %, fail below or on an error'
          ' (an OOM at a wake)'),
)


def declared_ids() -> set[str]:
    return {i for p in PROBES for i in p.ids}
