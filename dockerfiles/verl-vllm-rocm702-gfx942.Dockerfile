# Rendered by rocmkit from stack verl-vllm-rocm702 for gfx942. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl + vLLM rollout on ROCm 7.0.2 with flash-attention, TransformerEngine and aiter built from source
#
# Build with `rocmkit build --stack verl-vllm-rocm702 --arch gfx942` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/dev-ubuntu-22.04:7.0.2-complete AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common gpg-agent \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3.12 python3.12-dev python3.12-venv \
 && rm -rf /var/lib/apt/lists/*
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 7.0.2.
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
RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 7.0.2
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' build-essential ca-certificates ccache git libnuma-dev libsqlite3-dev pkg-config | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
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
    pip install --find-links https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/ torch==2.9.1.dev20251204+rocm7.0.2.lw.git351ff442 torchvision==0.24.0+rocm7.0.2.gitb919bd0c torchaudio==2.9.0+rocm7.0.2.gite3c6ee2b triton==3.5.1+rocm7.0.2.gita272dfa8 setuptools==79.0.1 wheel==0.45.1 packaging==25.0 ninja==1.11.1.4 cmake==3.31.6 pybind11==2.13.6 setuptools-scm==8.3.1 numpy==2.2.6 einops==0.8.1 psutil==7.0.0
# amdsmi from the image's own ROCm (what vLLM uses to detect AMD GPUs), matching it exactly.
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    cp -r /opt/rocm/share/amd_smi /tmp/amd_smi && pip install /tmp/amd_smi && rm -rf /tmp/amd_smi
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio|triton)==' || true; } > /opt/rocmkit/constraints.txt
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
ENV CCACHE_DIR=/root/.cache/ccache \
    CMAKE_C_COMPILER_LAUNCHER=ccache \
    CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_HIP_COMPILER_LAUNCHER=ccache

# ---- flash-attention: https://github.com/ROCm/flash-attention.git @ 83f9e450cd10e20701fb109db9c7703d376f282b
FROM base AS build-flash-attention
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/flash-attention
RUN git clone https://github.com/ROCm/flash-attention.git . \
 && git checkout --detach 83f9e450cd10e20701fb109db9c7703d376f282b \
 && git submodule update --init --recursive \
 && echo "flash-attention https://github.com/ROCm/flash-attention.git $(git rev-parse HEAD)" > /src/flash-attention.source
ENV BUILD_TARGET="rocm" \
    FLASH_ATTENTION_FORCE_BUILD="TRUE"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/flash-attention.source /wheels/flash-attention.source

# ---- transformer-engine: https://github.com/ROCm/TransformerEngine.git @ 90c04bcdc3c109505b318f40a39680263af55edf
FROM base AS build-transformer-engine
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/transformer-engine
RUN git clone https://github.com/ROCm/TransformerEngine.git . \
 && git checkout --detach 90c04bcdc3c109505b318f40a39680263af55edf \
 && git submodule update --init --recursive \
 && echo "transformer-engine https://github.com/ROCm/TransformerEngine.git $(git rev-parse HEAD)" > /src/transformer-engine.source
ENV NVTE_FRAMEWORK="pytorch" \
    NVTE_USE_ROCM="1" \
    NVTE_USE_HIPBLASLT="1" \
    CMAKE_PREFIX_PATH="/opt/rocm:/opt/rocm/hip:/usr/local:/usr"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/transformer-engine.source /wheels/transformer-engine.source

# ---- aiter: https://github.com/ROCm/aiter.git @ 45c428e54ac15b9b49d66018c8a1108b20c8336a
FROM base AS build-aiter
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/aiter
RUN git clone https://github.com/ROCm/aiter.git . \
 && git checkout --detach 45c428e54ac15b9b49d66018c8a1108b20c8336a \
 && git submodule update --init --recursive \
 && echo "aiter https://github.com/ROCm/aiter.git $(git rev-parse HEAD)" > /src/aiter.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements.txt
ENV PREBUILD_KERNELS="1"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/aiter.source /wheels/aiter.source

# ---- vllm: https://github.com/vllm-project/vllm.git @ 1ff9d335355c6f60afc3b8a5b4c15f36ab1ccfa6
FROM base AS build-vllm
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/vllm
RUN git clone https://github.com/vllm-project/vllm.git . \
 && git checkout --detach 1ff9d335355c6f60afc3b8a5b4c15f36ab1ccfa6 \
 && echo "vllm https://github.com/vllm-project/vllm.git $(git rev-parse HEAD)" > /src/vllm.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements/rocm.txt
ENV VLLM_TARGET_DEVICE="rocm" \
    ROCM_PATH="/opt/rocm"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/vllm.source /wheels/vllm.source

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
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/torch-memory-saver.source /wheels/torch-memory-saver.source

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=bind,from=build-flash-attention,source=/wheels,target=/tmp/wheels/flash-attention \
    --mount=type=bind,from=build-transformer-engine,source=/wheels,target=/tmp/wheels/transformer-engine \
    --mount=type=bind,from=build-aiter,source=/wheels,target=/tmp/wheels/aiter \
    --mount=type=bind,from=build-vllm,source=/wheels,target=/tmp/wheels/vllm \
    --mount=type=bind,from=build-torch-memory-saver,source=/wheels,target=/tmp/wheels/torch-memory-saver \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/flash-attention/*.whl /tmp/wheels/transformer-engine/*.whl /tmp/wheels/aiter/*.whl /tmp/wheels/vllm/*.whl /tmp/wheels/torch-memory-saver/*.whl 'ray[default]==2.55.1' verl==0.9.1 megatron-core==0.18.0 mbridge==0.15.1 transformers==5.8.1 hydra-core==1.3.2 nvidia-modelopt==0.44.0 setuptools==80.9.0 diffusers==0.36.0 \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps megatron-bridge==0.5.0
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-vllm-rocm702","description":"verl + vLLM rollout on ROCm 7.0.2 with flash-attention, TransformerEngine and aiter built from source","targets":["gfx942"],"rocm":"7.0.2","python":"3.12","base_image":"rocm/dev-ubuntu-22.04:7.0.2-complete","base_image_overridden":false,"base_pip":["torch==2.9.1.dev20251204+rocm7.0.2.lw.git351ff442","torchvision==0.24.0+rocm7.0.2.gitb919bd0c","torchaudio==2.9.0+rocm7.0.2.gite3c6ee2b","triton==3.5.1+rocm7.0.2.gita272dfa8","setuptools==79.0.1","wheel==0.45.1","packaging==25.0","ninja==1.11.1.4","cmake==3.31.6","pybind11==2.13.6","setuptools-scm==8.3.1","numpy==2.2.6","einops==0.8.1","psutil==7.0.0"],"base_pip_sources":["https://repo.radeon.com/rocm/manylinux/rocm-rel-7.0.2/"],"components":[{"name":"flash-attention","kind":"git","git":"https://github.com/ROCm/flash-attention.git","commit":"83f9e450cd10e20701fb109db9c7703d376f282b","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"transformer-engine","kind":"git","git":"https://github.com/ROCm/TransformerEngine.git","commit":"90c04bcdc3c109505b318f40a39680263af55edf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"aiter","kind":"git","git":"https://github.com/ROCm/aiter.git","commit":"45c428e54ac15b9b49d66018c8a1108b20c8336a","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"vllm","kind":"git","git":"https://github.com/vllm-project/vllm.git","commit":"1ff9d335355c6f60afc3b8a5b4c15f36ab1ccfa6","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"torch-memory-saver","kind":"git","git":"https://github.com/fzyzcjy/torch_memory_saver.git","commit":"f05a8754daf68238d54e4cf31cb3ba866684bbaf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"ray","kind":"pip","requirements":["ray[default]==2.55.1"],"no_deps":false},{"name":"verl","kind":"pip","requirements":["verl==0.9.1"],"no_deps":false},{"name":"megatron-core","kind":"pip","requirements":["megatron-core==0.18.0"],"no_deps":false},{"name":"mbridge","kind":"pip","requirements":["mbridge==0.15.1"],"no_deps":false},{"name":"megatron-bridge","kind":"pip","requirements":["megatron-bridge==0.5.0"],"no_deps":true},{"name":"megatron-bridge-bounds","kind":"pip","requirements":["transformers==5.8.1","hydra-core==1.3.2"],"no_deps":false},{"name":"nvidia-modelopt","kind":"pip","requirements":["nvidia-modelopt==0.44.0","setuptools==80.9.0"],"no_deps":false},{"name":"diffusers","kind":"pip","requirements":["diffusers==0.36.0"],"no_deps":false}],"runtime_env":{"HIP_FORCE_DEV_KERNARG":"1","HSA_NO_SCRATCH_RECLAIM":"1","NCCL_MIN_NCHANNELS":"112","TOKENIZERS_PARALLELISM":"false","SAFETENSORS_FAST_GPU":"1","MIOPEN_DEBUG_CONV_DIRECT":"0","NVTE_CK_USES_BWD_V3":"1","NVTE_CK_V3_BF16_CVT":"2","NVTE_USE_CAST_TRANSPOSE_TRITON":"0","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"amdgpu_ids":{"file":"files/libdrm-amdgpu-ids-instinct.txt","sha256":"7a8980e70bc99777bcdb018124d4171a99cd3e8a56ad0a8fa5203cb41df30e62","entries":28},"inputs_hash":"ffb867c8d3382f44abfbb62e2c2782fc27170b1ceb49525c388504e615efe444"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# kernel arguments in device memory: lower launch latency (vLLM docker/Dockerfile.rocm and verl Dockerfile.rocm7 final ENV)
ENV HIP_FORCE_DEV_KERNARG="1"
# scratch memory kept, not reclaimed: vLLM Dockerfile.rocm_base says Required for RCCL in ROCm7.1; every SGLang ROCm image sets it, rocm700 included
ENV HSA_NO_SCRATCH_RECLAIM="1"
# RCCL channel count for MI300X/MI355X XGMI (verl 0.4.1's Dockerfile.rocm ENV block; SGLang and radixark/miles ROCm images)
ENV NCCL_MIN_NCHANNELS="112"
# tokenizer threads and fork() in Ray workers do not mix (vLLM docker/Dockerfile.rocm and verl Dockerfile.rocm7 final ENV)
ENV TOKENIZERS_PARALLELISM="false"
# load safetensors straight to the GPU (vLLM docker/Dockerfile.rocm and verl Dockerfile.rocm7 final ENV)
ENV SAFETENSORS_FAST_GPU="1"
# as verl docker/rocm/Dockerfile.rocm@78269ccfa: skip MIOpen direct convolution kernels
ENV MIOPEN_DEBUG_CONV_DIRECT="0"
# TransformerEngine runtime knob: CK fused-attention v3 backward kernels (verl Dockerfile.rocm@78269ccfa)
ENV NVTE_CK_USES_BWD_V3="1"
# TransformerEngine runtime knob: bf16 rounding mode of the CK v3 kernels (verl Dockerfile.rocm@78269ccfa)
ENV NVTE_CK_V3_BF16_CVT="2"
# TransformerEngine runtime knob: HIP cast-transpose kernels, not Triton (verl Dockerfile.rocm@78269ccfa)
ENV NVTE_USE_CAST_TRANSPOSE_TRITON="0"
# Ray 2.55.1 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-vllm-rocm702" \
    org.opencontainers.image.description="verl + vLLM rollout on ROCm 7.0.2 with flash-attention, TransformerEngine and aiter built from source" \
    org.opencontainers.image.version="rocm7.0.2-gfx942-ffb867c8d338" \
    org.opencontainers.image.base.name="rocm/dev-ubuntu-22.04:7.0.2-complete" \
    io.rocmkit.stack="verl-vllm-rocm702" \
    io.rocmkit.targets="gfx942" \
    io.rocmkit.rocm="7.0.2" \
    io.rocmkit.python="3.12" \
    io.rocmkit.inputs-hash="ffb867c8d3382f44abfbb62e2c2782fc27170b1ceb49525c388504e615efe444" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.55.1"
