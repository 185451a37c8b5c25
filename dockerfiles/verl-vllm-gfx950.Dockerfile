# Rendered by rocmkit from stack verl-vllm for gfx950. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl + vLLM 0.22 rollout on ROCm 7.14 (rocm/primus:v26.4: torch 2.12, TE, flash-attention, aiter prebuilt), vLLM built from source
#
# Build with `rocmkit build --stack verl-vllm --arch gfx950` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: base component aiter is MUTABLE: the build records the base's amd-aiter in its base-versions file but cannot check it (verl's README names the base's aiter by commit (b5e03ed19), not by the version its metadata holds; the build records what it finds); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/primus:v26.4 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 7.14.0; torch, triton, transformer-engine, flash-attention at the versions the stack declares; aiter recorded, not checked (MUTABLE).
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
RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 7.14.0 torch torch 2.12.0+rocm7.14.0a20260608 triton triton 3.7.0 transformer-engine transformer_engine 2.14.0.dev0+e6ede467 flash-attention flash_attn 2.8.3 aiter amd-aiter -
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' build-essential ca-certificates ccache git libnuma-dev pkg-config | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
 && if [ -n "$missing" ]; then \
      apt-get update && echo "$missing" | xargs apt-get install -y --no-install-recommends && rm -rf /var/lib/apt/lists/*; fi
# ROCm's compilers and tools (hipcc, amdclang) on PATH: build scripts look for hipcc there to pick HIP over CUDA.
ENV PATH=/opt/rocm/bin:/opt/rocm/llvm/bin:$PATH
# vLLM and SGLang link -lamdhip64 from the default path (vllm-project/vllm#12695); without amdgpu.ids
# hipDeviceGetName reports "AMD Radeon Graphics" and tuned configs are not found (sgl-project/sglang PR #30984).
RUN ln -sf /opt/rocm/lib/libamdhip64.so /usr/lib/libamdhip64.so \
 && if [ -f /opt/amdgpu/share/libdrm/amdgpu.ids ] && [ ! -f /usr/share/libdrm/amdgpu.ids ]; then \
      mkdir -p /usr/share/libdrm && ln -s /opt/amdgpu/share/libdrm/amdgpu.ids /usr/share/libdrm/amdgpu.ids; fi
# A venv that still sees the image's own packages, so a base image's ROCm PyTorch stays in use.
RUN python3.12 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v == "3.12", "stack wants Python 3.12, image has " + v'
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
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install setuptools-scm==8.3.1
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# Likewise what the stack declares the base provides, at the versions the first step read.
# The stack's exact pins first, then what the image installed of the rest.
RUN mkdir -p /opt/rocmkit \
 && printf '%s\n' torch==2.12.0+rocm7.14.0a20260608 triton==3.7.0 > /opt/rocmkit/constraints.txt \
 && { pip list --format=freeze | grep -iE '^(torchvision|torchaudio|transformer[-_.]engine|flash[-_.]attn|amd[-_.]aiter)==' || true; } >> /opt/rocmkit/constraints.txt
ENV PIP_CONSTRAINT=/opt/rocmkit/constraints.txt
# GPU targets, one value for every build system that reads one, so none falls back to its own default
# or probes for a GPU the builder does not have (vllm-project/vllm#22590, ROCm/TransformerEngine#74).
ENV PYTORCH_ROCM_ARCH="gfx950" \
    GPU_ARCHS="gfx950" \
    NVTE_ROCM_ARCH="gfx950" \
    AMDGPU_TARGET="gfx950" \
    AMDGPU_TARGETS="gfx950" \
    GPU_TARGETS="gfx950" \
    GPU_ARCH_LIST="gfx950" \
    AITER_ROCM_ARCH="gfx950" \
    HIPCC_COMPILE_FLAGS_APPEND="--offload-arch=gfx950"
ENV CCACHE_DIR=/root/.cache/ccache \
    CMAKE_C_COMPILER_LAUNCHER=ccache \
    CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_HIP_COMPILER_LAUNCHER=ccache

# ---- causal-conv1d: https://github.com/Dao-AILab/causal-conv1d.git @ e940ead2fd962c56854455017541384909ca669f
FROM base AS build-causal-conv1d
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/causal-conv1d
RUN git clone https://github.com/Dao-AILab/causal-conv1d.git . \
 && git checkout --detach e940ead2fd962c56854455017541384909ca669f \
 && echo "causal-conv1d https://github.com/Dao-AILab/causal-conv1d.git $(git rev-parse HEAD)" > /src/causal-conv1d.source
ENV CAUSAL_CONV1D_FORCE_BUILD="TRUE" \
    MAMBA_FORCE_BUILD="TRUE"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/causal-conv1d.source /wheels/causal-conv1d.source

# ---- vllm: https://github.com/vllm-project/vllm.git @ 18d87a87dc39c1a50f452b218fdcc3aeec48d18e
FROM base AS build-vllm
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/vllm
RUN git clone https://github.com/vllm-project/vllm.git . \
 && git checkout --detach 18d87a87dc39c1a50f452b218fdcc3aeec48d18e \
 && echo "vllm https://github.com/vllm-project/vllm.git $(git rev-parse HEAD)" > /src/vllm.source
# The stack's patches: each checked before any is applied and before anything compiles, so one that no
# longer applies fails here, naming its file.
COPY patches/vllm/ /tmp/rocmkit-patches/vllm/
RUN true \
 && { git apply --check /tmp/rocmkit-patches/vllm/vllm-rocm-zero-remapped-vram.patch \
      || { echo "patch patches/vllm-rocm-zero-remapped-vram.patch no longer applies to vllm: the stack's patch needs review" >&2; exit 1; }; } \
 && git apply /tmp/rocmkit-patches/vllm/vllm-rocm-zero-remapped-vram.patch \
 && echo "vllm patch patches/vllm-rocm-zero-remapped-vram.patch sha256:0d247c673cc0b91ee32f5f21e05b898f7a8bc759e04f653206ecdc65bcfbab83" >> /src/vllm.source \
 && rm -rf /tmp/rocmkit-patches
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements/rocm.txt
ENV VLLM_TARGET_DEVICE="rocm"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/vllm.source /wheels/vllm.source

# ---- verl: https://github.com/verl-project/verl.git @ 7b19203c52503760f92e0368067c7eb744236274
FROM base AS build-verl
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/verl
RUN git clone https://github.com/verl-project/verl.git . \
 && git checkout --detach 7b19203c52503760f92e0368067c7eb744236274 \
 && git submodule update --init --recursive \
 && echo "verl https://github.com/verl-project/verl.git $(git rev-parse HEAD)" > /src/verl.source
# The stack's patches: each checked before any is applied and before anything compiles, so one that no
# longer applies fails here, naming its file.
COPY patches/verl/ /tmp/rocmkit-patches/verl/
RUN true \
 && { git apply --check /tmp/rocmkit-patches/verl/verl-rocm-rollout-defaults.patch \
      || { echo "patch patches/verl-rocm-rollout-defaults.patch no longer applies to verl: the stack's patch needs review" >&2; exit 1; }; } \
 && git apply /tmp/rocmkit-patches/verl/verl-rocm-rollout-defaults.patch \
 && echo "verl patch patches/verl-rocm-rollout-defaults.patch sha256:690c137b013199f3d1462a18d801810dcb17b4b0524be1167ff180397a8af57a" >> /src/verl.source \
 && rm -rf /tmp/rocmkit-patches
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/verl.source /wheels/verl.source

# ---- mbridge: https://github.com/ISEEKYAN/mbridge.git @ a61943d7fcb34a190471cfeb0a0eb8bbda621ddf
FROM base AS build-mbridge
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/mbridge
RUN git clone https://github.com/ISEEKYAN/mbridge.git . \
 && git checkout --detach a61943d7fcb34a190471cfeb0a0eb8bbda621ddf \
 && echo "mbridge https://github.com/ISEEKYAN/mbridge.git $(git rev-parse HEAD)" > /src/mbridge.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/mbridge.source /wheels/mbridge.source

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=bind,from=build-causal-conv1d,source=/wheels,target=/tmp/wheels/causal-conv1d \
    --mount=type=bind,from=build-vllm,source=/wheels,target=/tmp/wheels/vllm \
    --mount=type=bind,from=build-verl,source=/wheels,target=/tmp/wheels/verl \
    --mount=type=bind,from=build-mbridge,source=/wheels,target=/tmp/wheels/mbridge \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/causal-conv1d/*.whl /tmp/wheels/vllm/*.whl /tmp/wheels/verl/*.whl /tmp/wheels/mbridge/*.whl mcore_bridge==1.5.2 megatron-core==0.18.0 mathruler==0.1.0 qwen_vl_utils==0.0.14 datasets==5.0.0 accelerate==1.14.0 TransferQueue==0.1.8 flash-linear-attention==0.5.1 cupy-rocm-7-0==14.1.1 'ray[default]==2.55.1' \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps xgrammar==0.1.32
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The components the base provides are still the ones its check read: no install above replaced them.
RUN python /opt/rocmkit/basecheck.py final torch torch 2.12.0+rocm7.14.0a20260608 triton triton 3.7.0 transformer-engine transformer_engine 2.14.0.dev0+e6ede467 flash-attention flash_attn 2.8.3 aiter amd-aiter -
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-vllm","description":"verl + vLLM 0.22 rollout on ROCm 7.14 (rocm/primus:v26.4: torch 2.12, TE, flash-attention, aiter prebuilt), vLLM built from source","targets":["gfx950"],"rocm":"7.14.0","python":"3.12","base_image":"rocm/primus:v26.4","base_image_overridden":false,"base_pip":["setuptools-scm==8.3.1"],"base_pip_sources":[],"components":[{"name":"causal-conv1d","kind":"git","git":"https://github.com/Dao-AILab/causal-conv1d.git","commit":"e940ead2fd962c56854455017541384909ca669f","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"vllm","kind":"git","git":"https://github.com/vllm-project/vllm.git","commit":"18d87a87dc39c1a50f452b218fdcc3aeec48d18e","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[],"patches":[{"file":"patches/vllm-rocm-zero-remapped-vram.patch","sha256":"0d247c673cc0b91ee32f5f21e05b898f7a8bc759e04f653206ecdc65bcfbab83"}]},{"name":"xgrammar","kind":"pip","requirements":["xgrammar==0.1.32"],"no_deps":true,"removed":["tilelang"]},{"name":"verl","kind":"git","git":"https://github.com/verl-project/verl.git","commit":"7b19203c52503760f92e0368067c7eb744236274","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[],"patches":[{"file":"patches/verl-rocm-rollout-defaults.patch","sha256":"690c137b013199f3d1462a18d801810dcb17b4b0524be1167ff180397a8af57a"}]},{"name":"mbridge","kind":"git","git":"https://github.com/ISEEKYAN/mbridge.git","commit":"a61943d7fcb34a190471cfeb0a0eb8bbda621ddf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"qwen35-extras","kind":"pip","requirements":["mcore_bridge==1.5.2","megatron-core==0.18.0","mathruler==0.1.0","qwen_vl_utils==0.0.14","datasets==5.0.0","accelerate==1.14.0","TransferQueue==0.1.8","flash-linear-attention==0.5.1"],"no_deps":false},{"name":"cupy","kind":"pip","requirements":["cupy-rocm-7-0==14.1.1"],"no_deps":false},{"name":"ray","kind":"pip","requirements":["ray[default]==2.55.1"],"no_deps":false}],"runtime_env":{"HSA_ENABLE_IPC_MODE_LEGACY":"1","PYTORCH_ALLOC_CONF":"expandable_segments:True","NVTE_USE_GROUPED_GEMM_TRITON":"1","NCCL_DEBUG":"ERROR","ROCPROFILER_LOG_LEVEL":"fatal","MIOPEN_DEBUG_FORCE_IMMED_MODE_FALLBACK":"1","HIP_FORCE_DEV_KERNARG":"1","TOKENIZERS_PARALLELISM":"false","HSA_NO_SCRATCH_RECLAIM":"1","NCCL_MIN_NCHANNELS":"112","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"amdgpu_ids":{"file":"files/libdrm-amdgpu-ids-instinct.txt","sha256":"7a8980e70bc99777bcdb018124d4171a99cd3e8a56ad0a8fa5203cb41df30e62","entries":28},"base_provides":[{"name":"torch","distribution":"torch","version":"2.12.0+rocm7.14.0a20260608"},{"name":"triton","distribution":"triton","version":"3.7.0"},{"name":"transformer-engine","distribution":"transformer_engine","version":"2.14.0.dev0+e6ede467"},{"name":"flash-attention","distribution":"flash_attn","version":"2.8.3"},{"name":"aiter","distribution":"amd-aiter","version":null,"mutable_reason":"verl'"'"'s README names the base'"'"'s aiter by commit (b5e03ed19), not by the version its metadata holds; the build records what it finds"}],"constraints":{"path":"/opt/rocmkit/constraints.txt","pins":["torch==2.12.0+rocm7.14.0a20260608","triton==3.7.0"]},"inputs_hash":"7356b207c3310402fb28c31a75e60b81f422a242c5796b32779abe61e4ccedd7"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# ROCm 7.2 and later export VRAM for IPC as dma-buf, which leaks when rollout and training share GPUs (radixark/miles #1707); verl Dockerfile.rocm@c791da0bf sets legacy IPC
ENV HSA_ENABLE_IPC_MODE_LEGACY="1"
# less fragmentation between rollout and training phases (verl Dockerfile.rocm@c791da0bf)
ENV PYTORCH_ALLOC_CONF="expandable_segments:True"
# TransformerEngine's Triton grouped GEMM for MoE (verl Dockerfile.rocm@c791da0bf)
ENV NVTE_USE_GROUPED_GEMM_TRITON="1"
# RCCL logs errors only (verl Dockerfile.rocm@c791da0bf)
ENV NCCL_DEBUG="ERROR"
# silence rocprofiler's start-up messages (verl Dockerfile.rocm@c791da0bf)
ENV ROCPROFILER_LOG_LEVEL="fatal"
# MIOpen immediate-mode fallback, no find-db tuning at first use (verl Dockerfile.rocm@c791da0bf)
ENV MIOPEN_DEBUG_FORCE_IMMED_MODE_FALLBACK="1"
# rocmkit's addition: kernel arguments in device memory, lower launch latency (vLLM docker/Dockerfile.rocm final ENV)
ENV HIP_FORCE_DEV_KERNARG="1"
# rocmkit's addition: tokenizer threads and fork() in Ray workers do not mix (vLLM docker/Dockerfile.rocm final ENV)
ENV TOKENIZERS_PARALLELISM="false"
# RCCL initialises only with it where the HIP runtime reclaims scratch (ROCm/rccl#1867, ROCm/ATOM#913, vllm-project/vllm#32497); AMD's ROCm 10 verl recipe sets it (Dockerfile.rocm@af69c3f1 line 42)
ENV HSA_NO_SCRATCH_RECLAIM="1"
# RCCL channel count for MI300X/MI355X XGMI (AMD's ROCm workload optimization guide; AMD's ROCm 10 verl recipe, Dockerfile.rocm@af69c3f1 line 41)
ENV NCCL_MIN_NCHANNELS="112"
# Ray 2.55.1 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-vllm" \
    org.opencontainers.image.description="verl + vLLM 0.22 rollout on ROCm 7.14 (rocm/primus:v26.4: torch 2.12, TE, flash-attention, aiter prebuilt), vLLM built from source" \
    org.opencontainers.image.version="rocm7.14.0-gfx950-7356b207c331" \
    org.opencontainers.image.base.name="rocm/primus:v26.4" \
    io.rocmkit.stack="verl-vllm" \
    io.rocmkit.targets="gfx950" \
    io.rocmkit.rocm="7.14.0" \
    io.rocmkit.python="3.12" \
    io.rocmkit.inputs-hash="7356b207c3310402fb28c31a75e60b81f422a242c5796b32779abe61e4ccedd7" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.55.1" \
    io.rocmkit.base-provides="torch=2.12.0+rocm7.14.0a20260608,triton=3.7.0,transformer-engine=2.14.0.dev0+e6ede467,flash-attention=2.8.3,aiter=MUTABLE" \
    io.rocmkit.mutable-components="aiter"
