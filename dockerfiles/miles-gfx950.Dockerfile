# Rendered by rocmkit from stack miles for gfx950. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# Miles RL: SGLang rollout and Megatron-LM training on ROCm 7.0, on SGLang's own ROCm images
#
# Build with `rocmkit build --stack miles --arch gfx950` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: component transformer-engine is MUTABLE: built from 'v2.8_rocm', not a commit (Miles builds the v2.8_rocm branch head, which moves; no published file names its commit); two builds of this stack may differ
# WARNING: component sglang is MUTABLE: built from 'sglang-miles', not a commit (Miles checks out the sglang-miles branch head over the base image's SGLang (SGLANG_COMMIT empty); the branch head moves and no published file names its commit); two builds of this stack may differ
# WARNING: component megatron-bridge is MUTABLE: built from 'bridge', not a commit (Miles installs the bridge branch head of radixark/Megatron-Bridge, which moves; no published file names its commit); two builds of this stack may differ
# WARNING: base component torch is MUTABLE: the build records the base's torch in its base-versions file but cannot check it (no published file names the exact torch build of this SGLang image); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)
# WARNING: base component triton is MUTABLE: the build records the base's triton in its base-versions file but cannot check it (no published file names the Triton build of this SGLang image); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)
# WARNING: base component aiter is MUTABLE: the build records the base's amd-aiter in its base-versions file but cannot check it (SGLang's ROCm images build aiter in (sgl-project/sglang docker/rocm.Dockerfile AITER_COMMIT); the image tag names no version); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/sgl-dev:v0.5.14-rocm700-mi35x-20260627 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 7.0.0; torch, triton, aiter recorded, not checked (MUTABLE).
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
RUN python3.10 /opt/rocmkit/basecheck.py base rocm - 7.0.0 torch torch - triton triton - aiter amd-aiter -
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' build-essential cmake dnsutils ethtool git patch rsync | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
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
RUN python3.10 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v == "3.10", "stack wants Python 3.10, image has " + v'
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
    pip install setuptools==79.0.1 typer==0.25.1 click==8.2.1 numpy==1.26.4
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# Likewise what the stack declares the base provides, at the versions the first step read.
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio|triton|amd[-_.]aiter)==' || true; } > /opt/rocmkit/constraints.txt
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

# ---- megatron-lm: https://github.com/radixark/Megatron-LM.git @ 2e64d788b67fe8155774200c87606e1e449c494b
FROM base AS build-megatron-lm
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/megatron-lm
RUN git clone https://github.com/radixark/Megatron-LM.git . \
 && git checkout --detach 2e64d788b67fe8155774200c87606e1e449c494b \
 && git submodule update --init --recursive \
 && echo "megatron-lm https://github.com/radixark/Megatron-LM.git $(git rev-parse HEAD)" > /src/megatron-lm.source
# The stack's patches: each checked before any is applied and before anything compiles, so one that no
# longer applies fails here, naming its file.
COPY patches/megatron-lm/ /tmp/rocmkit-patches/megatron-lm/
RUN true \
 && { git apply --check /tmp/rocmkit-patches/megatron-lm/megatron-lm-rocm-fused-kernels.patch \
      || { echo "patch patches/megatron-lm-rocm-fused-kernels.patch no longer applies to megatron-lm: the stack's patch needs review" >&2; exit 1; }; } \
 && git apply /tmp/rocmkit-patches/megatron-lm/megatron-lm-rocm-fused-kernels.patch \
 && echo "megatron-lm patch patches/megatron-lm-rocm-fused-kernels.patch sha256:c667c22c36f0016b78f2b033b44bcef305f1923844fa5e2c560a9e69f2b64d9b" >> /src/megatron-lm.source \
 && rm -rf /tmp/rocmkit-patches
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/megatron-lm.source /wheels/megatron-lm.source

# ---- transformer-engine: https://github.com/ROCm/TransformerEngine.git @ v2.8_rocm
# WARNING: MUTABLE ref v2.8_rocm: Miles builds the v2.8_rocm branch head, which moves; no published file names its commit
FROM base AS build-transformer-engine
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/transformer-engine
RUN git clone https://github.com/ROCm/TransformerEngine.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/v2.8_rocm^{commit}' || git rev-parse --verify 'v2.8_rocm^{commit}')" \
 && git submodule update --init --recursive \
 && echo "transformer-engine https://github.com/ROCm/TransformerEngine.git $(git rev-parse HEAD)" > /src/transformer-engine.source
ENV NVTE_FRAMEWORK="pytorch" \
    NVTE_USE_ROCM="1" \
    NVTE_USE_HIPBLASLT="1" \
    NVTE_FUSED_ATTN="0" \
    CMAKE_PREFIX_PATH="/opt/rocm:/opt/rocm/hip:/usr/local:/usr"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/transformer-engine.source /wheels/transformer-engine.source

# ---- mbridge: https://github.com/ISEEKYAN/mbridge.git @ 89eb10887887bc74853f89a4de258c0702932a1c
FROM base AS build-mbridge
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/mbridge
RUN git clone https://github.com/ISEEKYAN/mbridge.git . \
 && git checkout --detach 89eb10887887bc74853f89a4de258c0702932a1c \
 && echo "mbridge https://github.com/ISEEKYAN/mbridge.git $(git rev-parse HEAD)" > /src/mbridge.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/mbridge.source /wheels/mbridge.source

# ---- sglang: https://github.com/sgl-project/sglang.git @ sglang-miles
# WARNING: MUTABLE ref sglang-miles: Miles checks out the sglang-miles branch head over the base image's SGLang (SGLANG_COMMIT empty); the branch head moves and no published file names its commit
FROM base AS build-sglang
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sglang
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/sglang-miles^{commit}' || git rev-parse --verify 'sglang-miles^{commit}')" \
 && echo "sglang https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sglang.source
WORKDIR /src/sglang/python
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/sglang.source /wheels/sglang.source

# ---- torch-memory-saver: https://github.com/fzyzcjy/torch_memory_saver.git @ f05a8754daf68238d54e4cf31cb3ba866684bbaf
FROM base AS build-torch-memory-saver
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/torch-memory-saver
RUN git clone https://github.com/fzyzcjy/torch_memory_saver.git . \
 && git checkout --detach f05a8754daf68238d54e4cf31cb3ba866684bbaf \
 && echo "torch-memory-saver https://github.com/fzyzcjy/torch_memory_saver.git $(git rev-parse HEAD)" > /src/torch-memory-saver.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/torch-memory-saver.source /wheels/torch-memory-saver.source

# ---- megatron-bridge: https://github.com/radixark/Megatron-Bridge.git @ bridge
# WARNING: MUTABLE ref bridge: Miles installs the bridge branch head of radixark/Megatron-Bridge, which moves; no published file names its commit
FROM base AS build-megatron-bridge
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/megatron-bridge
RUN git clone https://github.com/radixark/Megatron-Bridge.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/bridge^{commit}' || git rev-parse --verify 'bridge^{commit}')" \
 && echo "megatron-bridge https://github.com/radixark/Megatron-Bridge.git $(git rev-parse HEAD)" > /src/megatron-bridge.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/megatron-bridge.source /wheels/megatron-bridge.source

# ---- miles: https://github.com/radixark/miles.git @ 31f1ca961a94cb860cec3b2dea34ec332bfa8f76
FROM base AS build-miles
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/miles
RUN git clone https://github.com/radixark/miles.git . \
 && git checkout --detach 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 \
 && echo "miles https://github.com/radixark/miles.git $(git rev-parse HEAD)" > /src/miles.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/miles.source /wheels/miles.source

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=bind,from=build-megatron-lm,source=/wheels,target=/tmp/wheels/megatron-lm \
    --mount=type=bind,from=build-transformer-engine,source=/wheels,target=/tmp/wheels/transformer-engine \
    --mount=type=bind,from=build-mbridge,source=/wheels,target=/tmp/wheels/mbridge \
    --mount=type=bind,from=build-sglang,source=/wheels,target=/tmp/wheels/sglang \
    --mount=type=bind,from=build-torch-memory-saver,source=/wheels,target=/tmp/wheels/torch-memory-saver \
    --mount=type=bind,from=build-megatron-bridge,source=/wheels,target=/tmp/wheels/megatron-bridge \
    --mount=type=bind,from=build-miles,source=/wheels,target=/tmp/wheels/miles \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/megatron-lm/*.whl /tmp/wheels/transformer-engine/*.whl /tmp/wheels/mbridge/*.whl /tmp/wheels/sglang/*.whl /tmp/wheels/torch-memory-saver/*.whl /tmp/wheels/megatron-bridge/*.whl /tmp/wheels/miles/*.whl flash-linear-attention==0.4.2 numba==0.65.1 'nvidia-modelopt[torch]==0.47.0' setuptools==80.9.0 \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps mooncake-transfer-engine-non-cuda==0.3.12.post1
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps tile_kernels==1.0.0
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps megatron-energon==7.4.1 multi-storage-client==1.3.1
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The components the base provides are still the ones its check read: no install above replaced them.
RUN python /opt/rocmkit/basecheck.py final torch torch - triton triton - aiter amd-aiter -
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"miles","description":"Miles RL: SGLang rollout and Megatron-LM training on ROCm 7.0, on SGLang'"'"'s own ROCm images","targets":["gfx950"],"rocm":"7.0.0","python":"3.10","base_image":"rocm/sgl-dev:v0.5.14-rocm700-mi35x-20260627","base_image_overridden":false,"base_pip":["setuptools==79.0.1","typer==0.25.1","click==8.2.1","numpy==1.26.4"],"base_pip_sources":[],"components":[{"name":"megatron-lm","kind":"git","git":"https://github.com/radixark/Megatron-LM.git","commit":"2e64d788b67fe8155774200c87606e1e449c494b","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[],"branch":"miles-main","patches":[{"file":"patches/megatron-lm-rocm-fused-kernels.patch","sha256":"c667c22c36f0016b78f2b033b44bcef305f1923844fa5e2c560a9e69f2b64d9b"}]},{"name":"transformer-engine","kind":"git","git":"https://github.com/ROCm/TransformerEngine.git","commit":null,"tag":null,"mutable_ref":"v2.8_rocm","mutable_reason":"Miles builds the v2.8_rocm branch head, which moves; no published file names its commit","needs":[]},{"name":"mbridge","kind":"git","git":"https://github.com/ISEEKYAN/mbridge.git","commit":"89eb10887887bc74853f89a4de258c0702932a1c","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sglang","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":null,"tag":null,"mutable_ref":"sglang-miles","mutable_reason":"Miles checks out the sglang-miles branch head over the base image'"'"'s SGLang (SGLANG_COMMIT empty); the branch head moves and no published file names its commit","needs":[]},{"name":"torch-memory-saver","kind":"git","git":"https://github.com/fzyzcjy/torch_memory_saver.git","commit":"f05a8754daf68238d54e4cf31cb3ba866684bbaf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"megatron-bridge","kind":"git","git":"https://github.com/radixark/Megatron-Bridge.git","commit":null,"tag":null,"mutable_ref":"bridge","mutable_reason":"Miles installs the bridge branch head of radixark/Megatron-Bridge, which moves; no published file names its commit","needs":[]},{"name":"miles","kind":"git","git":"https://github.com/radixark/miles.git","commit":"31f1ca961a94cb860cec3b2dea34ec332bfa8f76","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[],"branch":"main"},{"name":"mooncake","kind":"pip","requirements":["mooncake-transfer-engine-non-cuda==0.3.12.post1"],"no_deps":true},{"name":"flash-linear-attention","kind":"pip","requirements":["flash-linear-attention==0.4.2"],"no_deps":false},{"name":"tile-kernels","kind":"pip","requirements":["tile_kernels==1.0.0"],"no_deps":true},{"name":"numba","kind":"pip","requirements":["numba==0.65.1"],"no_deps":false},{"name":"megatron-extras","kind":"pip","requirements":["megatron-energon==7.4.1","multi-storage-client==1.3.1"],"no_deps":true},{"name":"modelopt","kind":"pip","requirements":["nvidia-modelopt[torch]==0.47.0","setuptools==80.9.0"],"no_deps":false}],"runtime_env":{"MILES_HARDWARE_PLATFORM":"rocm","HIP_FORCE_DEV_KERNARG":"1","HSA_ENABLE_IPC_MODE_LEGACY":"1","HSA_NO_SCRATCH_RECLAIM":"1","SGLANG_USE_AITER":"1","SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN":"1","SGLANG_MOE_PADDING":"1","SGLANG_SET_CPU_AFFINITY":"1","SGLANG_ROCM_FUSED_DECODE_MLA":"1","SGLANG_USE_ROCM700A":"1","NCCL_MIN_NCHANNELS":"112","TORCHINDUCTOR_MAX_AUTOTUNE":"1","TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE":"1","RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO":"0"},"amdgpu_ids":{"file":"files/libdrm-amdgpu-ids-instinct.txt","sha256":"7a8980e70bc99777bcdb018124d4171a99cd3e8a56ad0a8fa5203cb41df30e62","entries":28},"base_provides":[{"name":"torch","distribution":"torch","version":null,"mutable_reason":"no published file names the exact torch build of this SGLang image"},{"name":"triton","distribution":"triton","version":null,"mutable_reason":"no published file names the Triton build of this SGLang image"},{"name":"aiter","distribution":"amd-aiter","version":null,"mutable_reason":"SGLang'"'"'s ROCm images build aiter in (sgl-project/sglang docker/rocm.Dockerfile AITER_COMMIT); the image tag names no version"}],"inputs_hash":"3c1a85df797815b7ddad65ffe7478c8d9a05ddfb33d155353b6b29361b124142"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# lets Miles' scripts and tests pick the ROCm recipe without probing the device (Dockerfile.rocm)
ENV MILES_HARDWARE_PLATFORM="rocm"
# kernel arguments in device memory: lower launch latency (Dockerfile.rocm runtime knobs)
ENV HIP_FORCE_DEV_KERNARG="1"
# ROCm 7.2 switched IPC to dma-buf, which leaks exported VRAM in colocate; Miles forces legacy IPC (Dockerfile.rocm)
ENV HSA_ENABLE_IPC_MODE_LEGACY="1"
# scratch memory kept, not reclaimed (Dockerfile.rocm runtime knobs, as SGLang's own image)
ENV HSA_NO_SCRATCH_RECLAIM="1"
# route SGLang kernels through aiter (Dockerfile.rocm runtime knobs)
ENV SGLANG_USE_AITER="1"
# let Miles run SGLang with a context longer than the model config states (Dockerfile.rocm runtime knobs)
ENV SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1"
# pad MoE weights for the ROCm kernels (Dockerfile.rocm runtime knobs)
ENV SGLANG_MOE_PADDING="1"
# bind SGLang workers to the GPU NUMA node (Dockerfile.rocm runtime knobs)
ENV SGLANG_SET_CPU_AFFINITY="1"
# SGLang's fused MLA decode kernel on ROCm (Dockerfile.rocm runtime knobs)
ENV SGLANG_ROCM_FUSED_DECODE_MLA="1"
# build.py sets SGLANG_USE_ROCM700A=1 on both rocm700 variants (the Dockerfile ENV takes the build arg; its ARG default 0 is for rocm720)
ENV SGLANG_USE_ROCM700A="1"
# RCCL channel count for MI300X/MI355X XGMI (Dockerfile.rocm runtime knobs)
ENV NCCL_MIN_NCHANNELS="112"
# Inductor autotunes its kernels (Dockerfile.rocm runtime knobs)
ENV TORCHINDUCTOR_MAX_AUTOTUNE="1"
# Inductor autotunes pointwise kernels too (Dockerfile.rocm runtime knobs)
ENV TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE="1"
# keep GPUs visible to Ray num_gpus=0 coordinators so Megatron device checks do not crash (Dockerfile.rocm)
ENV RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0"
LABEL org.opencontainers.image.title="rocmkit/miles" \
    org.opencontainers.image.description="Miles RL: SGLang rollout and Megatron-LM training on ROCm 7.0, on SGLang's own ROCm images" \
    org.opencontainers.image.version="rocm7.0.0-gfx950-3c1a85df7978" \
    org.opencontainers.image.base.name="rocm/sgl-dev:v0.5.14-rocm700-mi35x-20260627" \
    io.rocmkit.stack="miles" \
    io.rocmkit.targets="gfx950" \
    io.rocmkit.rocm="7.0.0" \
    io.rocmkit.python="3.10" \
    io.rocmkit.inputs-hash="3c1a85df797815b7ddad65ffe7478c8d9a05ddfb33d155353b6b29361b124142" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.base-provides="torch=MUTABLE,triton=MUTABLE,aiter=MUTABLE" \
    io.rocmkit.mutable-components="transformer-engine,sglang,megatron-bridge,torch,triton,aiter"
