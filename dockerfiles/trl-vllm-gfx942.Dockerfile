# Rendered by rocmkit from stack trl-vllm for gfx942. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# TRL 1.16 GRPO with a vLLM 0.23 server (trl vllm-serve) and accelerate + DeepSpeed on ROCm 7.14
#
# Build with `rocmkit build --stack trl-vllm --arch gfx942` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: base component triton is MUTABLE: the build records the base's triton in its base-versions file but cannot check it (the image tag and its page name no Triton version); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)
# WARNING: base component aiter is MUTABLE: the build records the base's amd-aiter in its base-versions file but cannot check it (AMD's vLLM images build aiter in (vLLM docker/Dockerfile.rocm_base); the tag names no version); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 7.14.0; vllm, torch at the release the stack declares; triton, aiter recorded, not checked (MUTABLE).
# A retagged base fails here in seconds, naming the component and both versions; what was read stays in
# /opt/rocmkit/base-versions.txt.
RUN mkdir -p /opt/rocmkit \
 && printf '%s\n' \
      'import glob' \
      'import importlib.metadata as md' \
      'import os' \
      'import re' \
      'import sys' \
      'def canon(name):' \
      '    return re.sub(r"[-_.]+", "-", name or "").lower()' \
      'have = {}' \
      'for d in reversed(list(md.distributions())):' \
      '    have[canon(d.metadata["Name"])] = d.version' \
      'def read(p):' \
      '    with open(p) as f:' \
      '        return f.read().strip(), p' \
      'def rocm(declared):' \
      '    paths = ["/opt/rocm/.info/version"]' \
      '    if os.environ.get("ROCM_PATH"):' \
      '        paths.append(os.path.join(os.environ["ROCM_PATH"], ".info", "version"))' \
      '    for p in paths:' \
      '        if os.path.isfile(p):' \
      '            return read(p)' \
      '    trees = [read(p) for p in sorted(glob.glob("/opt/rocm-*/.info/version"))]' \
      '    if trees:' \
      '        return next((t for t in trees if same_release(t[0], declared)), trees[0])' \
      '    v = have.get("rocm-sdk-core")' \
      '    return v, "rocm-sdk-core" if v else None' \
      'def same_release(held, declared):' \
      '    m = re.match(r"[0-9]+(\.[0-9]+)*", held or "")' \
      '    have = [int(x) for x in m.group(0).split(".")] if m else []' \
      '    want = [int(x) for x in declared.split(".")]' \
      '    have = (have + [0] * len(want))[:len(want)]' \
      '    return held is not None and have == want' \
      'def matches(declared, held):' \
      '    if held is None:' \
      '        return False' \
      '    if "+" not in declared:' \
      '        held = held.split("+")[0]' \
      '    return held == declared' \
      'when, args = sys.argv[1], sys.argv[2:]' \
      'bad, lines = [], []' \
      'for name, dist, version in zip(args[0::3], args[1::3], args[2::3]):' \
      '    if dist == "-":' \
      '        held, where = rocm(version)' \
      '        ok = same_release(held, version)' \
      '    else:' \
      '        held, where = have.get(canon(dist)), dist' \
      '        if version.startswith("release:"):' \
      '            ok = same_release(held, version.split(":")[1])' \
      '            version = "release " + version.split(":")[1]' \
      '        else:' \
      '            ok = version == "-" or matches(version, held)' \
      '    lines.append("%s %s %s" % (name, held or "absent", where or "-"))' \
      '    if not ok:' \
      '        bad.append("component %s: the stack declares %s, the %s holds %s" % (' \
      '            name, version, "base image" if when == "base" else "image", held or "none (absent)"))' \
      'if when == "base":' \
      '    os.makedirs(os.path.dirname(sys.argv[0]), exist_ok=True)' \
      '    with open(os.path.join(os.path.dirname(sys.argv[0]), "base-versions.txt"), "w") as f:' \
      '        f.write("".join(line + "\n" for line in lines))' \
      'for line in bad:' \
      '    print("rocmkit: " + line, file=sys.stderr)' \
      'if bad:' \
      '    hint = ("the base image is not the one the stack was written for (a retagged or another image): pin it by "' \
      '            "digest (rocmkit lock) or update the versions in the stack") if when == "base" else (' \
      '            "a later install replaced a component the base provides: pin it in the stack or keep it out")' \
      '    print("rocmkit: hint: " + hint, file=sys.stderr)' \
      '    sys.exit(1)' \
      'print("rocmkit: the %s holds what the stack declares: %s" % (' \
      '    "base image" if when == "base" else "image", ", ".join(lines) or "nothing declared"))' \
      > /opt/rocmkit/basecheck.py
RUN python3.14 /opt/rocmkit/basecheck.py base rocm - 7.14.0 vllm vllm release:0.23.0 torch torch release:2.11.0 triton triton - aiter amd-aiter -
# ROCm's compilers and tools (hipcc, amdclang) on PATH: build scripts look for hipcc there to pick HIP over CUDA.
ENV PATH=/opt/rocm/bin:/opt/rocm/llvm/bin:$PATH
# vLLM and SGLang link -lamdhip64 from the default path (vllm-project/vllm#12695); without amdgpu.ids
# hipDeviceGetName reports "AMD Radeon Graphics" and tuned configs are not found (sgl-project/sglang PR #30984).
RUN ln -sf /opt/rocm/lib/libamdhip64.so /usr/lib/libamdhip64.so \
 && if [ -f /opt/amdgpu/share/libdrm/amdgpu.ids ] && [ ! -f /usr/share/libdrm/amdgpu.ids ]; then \
      mkdir -p /usr/share/libdrm && ln -s /opt/amdgpu/share/libdrm/amdgpu.ids /usr/share/libdrm/amdgpu.ids; fi
# A venv that still sees the image's own packages, so a base image's ROCm PyTorch stays in use.
RUN python3.14 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v == "3.14", "stack wants Python 3.14, image has " + v'
ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv
# MI350X/MI355X named AMD Radeon Graphics by an older libdrm amdgpu.ids (ROCm/ROCm#5992); SGLang's ROCm recipe ships a fixed table
# libdrm amdgpu.ids lines from the stack's files/libdrm-amdgpu-ids-instinct.txt (sha256 7a8980e70bc9): each is appended to
# the image's table (both libdrm paths, or a new one) only where that device and revision are missing.
RUN printf '%s,\t%s,\t%s\n' \
      66A1 02 'AMD Instinct MI60 / MI50' \
      6860 00 'AMD Radeon Instinct MI25' \
      6860 01 'AMD Radeon Instinct MI25' \
      6860 02 'AMD Radeon Instinct MI25' \
      6860 04 'AMD Radeon Instinct MI25x2' \
      6864 04 'AMD Radeon Instinct MI25x2' \
      686C 00 'AMD Radeon Instinct MI25 MxGPU' \
      686C 01 'AMD Radeon Instinct MI25 MxGPU' \
      686C 02 'AMD Radeon Instinct MI25 MxGPU' \
      686C 04 'AMD Radeon Instinct MI25x2 MxGPU' \
      686C 06 'AMD Radeon Instinct MI25 MxGPU' \
      738C 01 'AMD Instinct MI100' \
      7408 00 'AMD Instinct MI250X' \
      740C 01 'AMD Instinct MI250X / MI250' \
      740F 02 'AMD Instinct MI210' \
      74A0 00 'AMD Instinct MI300A' \
      74A1 00 'AMD Instinct MI300X' \
      74A2 00 'AMD Instinct MI308X' \
      74A5 00 'AMD Instinct MI325X' \
      74A8 00 'AMD Instinct MI308X HF' \
      74A9 00 'AMD Instinct MI300X HF' \
      74B5 00 'AMD Instinct MI300X VF' \
      74B6 00 'AMD Instinct MI308X' \
      74BD 00 'AMD Instinct MI300X HF' \
      75A0 00 'AMD Instinct MI350X' \
      75A3 00 'AMD Instinct MI355X' \
      75B0 00 'AMD Instinct MI350X VF' \
      75B3 00 'AMD Instinct MI355X VF' \
      > /tmp/rocmkit-amdgpu.ids \
 && tables="$(for f in /usr/share/libdrm/amdgpu.ids /opt/amdgpu/share/libdrm/amdgpu.ids; do if [ -e "$f" ]; then readlink -f "$f"; fi; done | sort -u)" \
 && if [ -z "$tables" ]; then mkdir -p /usr/share/libdrm && printf '1.0.0\n' > /usr/share/libdrm/amdgpu.ids && tables=/usr/share/libdrm/amdgpu.ids; fi \
 && for t in $tables; do \
      awk -F',[[:space:]]*' 'NR == FNR { if ($0 !~ /^#/ && NF >= 3) have[$1 "," $2] = 1; next } !(($1 "," $2) in have)' "$t" /tmp/rocmkit-amdgpu.ids > /tmp/rocmkit-amdgpu.add \
      && cat /tmp/rocmkit-amdgpu.add >> "$t" && echo "amdgpu.ids: $(wc -l < /tmp/rocmkit-amdgpu.add) line(s) added to $t"; done \
 && rm -f /tmp/rocmkit-amdgpu.ids /tmp/rocmkit-amdgpu.add
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# Likewise what the stack declares the base provides, at the versions the first step read.
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio|vllm|triton|amd[-_.]aiter)==' || true; } > /opt/rocmkit/constraints.txt
ENV PIP_CONSTRAINT=/opt/rocmkit/constraints.txt
# GPU targets, one value for every build system that reads one, so none falls back to its own default
# or probes for a GPU the builder does not have (vllm-project/vllm#22590, ROCm/TransformerEngine#74).
ENV PYTORCH_ROCM_ARCH="gfx942" \
    GPU_ARCHS="gfx942" \
    NVTE_ROCM_ARCH="gfx942" \
    AMDGPU_TARGET="gfx942" \
    AMDGPU_TARGETS="gfx942" \
    GPU_TARGETS="gfx942" \
    GPU_ARCH_LIST="gfx942" \
    AITER_ROCM_ARCH="gfx942" \
    HIPCC_COMPILE_FLAGS_APPEND="--offload-arch=gfx942"

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install trl==1.16.0 accelerate==1.15.0 datasets==5.2.0 deepspeed==0.19.8
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The components the base provides are still the ones its check read: no install above replaced them.
RUN python /opt/rocmkit/basecheck.py final vllm vllm release:0.23.0 torch torch release:2.11.0 triton triton - aiter amd-aiter -
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"trl-vllm","description":"TRL 1.16 GRPO with a vLLM 0.23 server (trl vllm-serve) and accelerate + DeepSpeed on ROCm 7.14","targets":["gfx942"],"rocm":"7.14.0","python":"3.14","base_image":"rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0","base_image_overridden":false,"base_pip":[],"base_pip_sources":[],"components":[{"name":"trl","kind":"pip","requirements":["trl==1.16.0","accelerate==1.15.0","datasets==5.2.0"],"no_deps":false},{"name":"deepspeed","kind":"pip","requirements":["deepspeed==0.19.8"],"no_deps":false}],"runtime_env":{"TOKENIZERS_PARALLELISM":"false","HIP_FORCE_DEV_KERNARG":"1","HSA_NO_SCRATCH_RECLAIM":"1","NCCL_MIN_NCHANNELS":"112"},"amdgpu_ids":{"file":"files/libdrm-amdgpu-ids-instinct.txt","sha256":"7a8980e70bc99777bcdb018124d4171a99cd3e8a56ad0a8fa5203cb41df30e62","entries":28},"base_provides":[{"name":"vllm","distribution":"vllm","version":null,"release":"0.23.0"},{"name":"torch","distribution":"torch","version":null,"release":"2.11.0"},{"name":"triton","distribution":"triton","version":null,"mutable_reason":"the image tag and its page name no Triton version"},{"name":"aiter","distribution":"amd-aiter","version":null,"mutable_reason":"AMD'"'"'s vLLM images build aiter in (vLLM docker/Dockerfile.rocm_base); the tag names no version"}],"inputs_hash":"816e0c037f2a58f90d0076451c7f202c8cc302d86765053b02c4a6f123e2b3e8"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# tokenizer threads and the fork() of accelerate's and vLLM's workers do not mix
ENV TOKENIZERS_PARALLELISM="false"
# kernel arguments in device memory: lower launch latency (vLLM docker/Dockerfile.rocm final ENV)
ENV HIP_FORCE_DEV_KERNARG="1"
# RCCL initialises only with it where the HIP runtime reclaims scratch (ROCm/rccl#1867, ROCm/ATOM#913, vllm-project/vllm#32497); AMD's ROCm 10 verl recipe sets it (Dockerfile.rocm@af69c3f1 line 42)
ENV HSA_NO_SCRATCH_RECLAIM="1"
# RCCL channel count for MI300X/MI355X XGMI (AMD's ROCm workload optimization guide; AMD's ROCm 10 verl recipe, Dockerfile.rocm@af69c3f1 line 41)
ENV NCCL_MIN_NCHANNELS="112"
LABEL org.opencontainers.image.title="rocmkit/trl-vllm" \
    org.opencontainers.image.description="TRL 1.16 GRPO with a vLLM 0.23 server (trl vllm-serve) and accelerate + DeepSpeed on ROCm 7.14" \
    org.opencontainers.image.version="rocm7.14.0-gfx942-816e0c037f2a" \
    org.opencontainers.image.base.name="rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0" \
    io.rocmkit.stack="trl-vllm" \
    io.rocmkit.targets="gfx942" \
    io.rocmkit.rocm="7.14.0" \
    io.rocmkit.python="3.14" \
    io.rocmkit.inputs-hash="816e0c037f2a58f90d0076451c7f202c8cc302d86765053b02c4a6f123e2b3e8" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.base-provides="vllm=0.23.0.*,torch=2.11.0.*,triton=MUTABLE,aiter=MUTABLE" \
    io.rocmkit.mutable-components="triton,aiter"
