# Rendered by rocmkit from stack verl-rocm6 for gfx942. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl 0.4.1-era ROCm 6.3.4 recipe for MI300X: verl 0.5.0.dev with vLLM 0.8.5 sleep/NUMA patch and SGLang 0.4.6.post5
#
# Build with `rocmkit build --stack verl-rocm6 --arch gfx942` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: component transformer-engine is MUTABLE: built from '236178e5', not a commit (verl's recipe names only this 8-digit prefix, and no published file names the full commit); two builds of this stack may differ
# WARNING: component triton is MUTABLE: built from 'improve_fa_decode_3.0.0', not a commit (a branch head, which moves; no published file names the commit the recipe built); two builds of this stack may differ
# WARNING: component torch-memory-saver is MUTABLE: built from 'numa', not a commit (a branch head of a fork, which moves; no published file names the commit the recipe built); two builds of this stack may differ

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/dev-ubuntu-22.04:6.3.4-complete AS base
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
# ROCm 6.3.4.
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
RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 6.3.4
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' build-essential ca-certificates git liblzma-dev libnuma-dev pkg-config | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
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
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --extra-index-url https://download.pytorch.org/whl/rocm6.2.4 torch==2.6.0+rocm6.2.4 torchvision==0.21.0+rocm6.2.4 torchaudio==2.6.0+rocm6.2.4 setuptools==75.8.0 wheel==0.45.1 packaging==24.2 ninja==1.11.1.3 cmake==3.31.6 pybind11==2.13.6 setuptools-scm==8.1.0 psutil==7.0.0
# amdsmi from the image's own ROCm (what vLLM uses to detect AMD GPUs), matching it exactly.
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    cp -r /opt/rocm/share/amd_smi /tmp/amd_smi && pip install /tmp/amd_smi && rm -rf /tmp/amd_smi
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio)==' || true; } > /opt/rocmkit/constraints.txt
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

# ---- transformer-engine: https://github.com/ROCm/TransformerEngine.git @ 236178e5
# WARNING: MUTABLE ref 236178e5: verl's recipe names only this 8-digit prefix, and no published file names the full commit
FROM base AS build-transformer-engine
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/transformer-engine
RUN git clone https://github.com/ROCm/TransformerEngine.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/236178e5^{commit}' || git rev-parse --verify '236178e5^{commit}')" \
 && git submodule update --init --recursive \
 && echo "transformer-engine https://github.com/ROCm/TransformerEngine.git $(git rev-parse HEAD)" > /src/transformer-engine.source
ENV NVTE_FRAMEWORK="pytorch" \
    NVTE_USE_ROCM="1" \
    NVTE_USE_HIPBLASLT="1" \
    CMAKE_PREFIX_PATH="/opt/rocm:/opt/rocm/hip:/usr/local:/usr"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/transformer-engine.source /wheels/transformer-engine.source

# ---- vllm-rocm-fork: https://github.com/ROCm/vllm.git @ 113274a0e740ac779ac713de643e12856b10ce05
FROM base AS build-vllm-rocm-fork
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/vllm-rocm-fork
RUN git clone https://github.com/ROCm/vllm.git . \
 && git checkout --detach 113274a0e740ac779ac713de643e12856b10ce05 \
 && echo "vllm-rocm-fork https://github.com/ROCm/vllm.git $(git rev-parse HEAD)" > /src/vllm-rocm-fork.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install boto3==1.35.99
ENV VLLM_TARGET_DEVICE="rocm"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/vllm-rocm-fork.source /wheels/vllm-rocm-fork.source

# ---- sgl-kernel: https://github.com/sgl-project/sglang.git @ 7e257cd666c0d639626487987ea8e590da1e9395
FROM base AS build-sgl-kernel
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sgl-kernel
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 7e257cd666c0d639626487987ea8e590da1e9395 \
 && echo "sgl-kernel https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sgl-kernel.source
WORKDIR /src/sgl-kernel/sgl-kernel
RUN cp pyproject_rocm.toml pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup_rocm.py bdist_wheel --dist-dir /wheels \
 && cp /src/sgl-kernel.source /wheels/sgl-kernel.source

# ---- sglang: https://github.com/sgl-project/sglang.git @ 7e257cd666c0d639626487987ea8e590da1e9395
FROM base AS build-sglang
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sglang
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 7e257cd666c0d639626487987ea8e590da1e9395 \
 && echo "sglang https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sglang.source
RUN --mount=type=bind,from=build-sgl-kernel,source=/wheels,target=/deps/sgl-kernel \
    --mount=type=bind,from=build-vllm-rocm-fork,source=/wheels,target=/deps/vllm-rocm-fork \
    pip install --no-cache-dir --no-deps /deps/sgl-kernel/*.whl /deps/vllm-rocm-fork/*.whl
WORKDIR /src/sglang/python
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/sglang.source /wheels/sglang.source

# ---- triton: https://github.com/ROCm/triton.git @ improve_fa_decode_3.0.0
# WARNING: MUTABLE ref improve_fa_decode_3.0.0: a branch head, which moves; no published file names the commit the recipe built
FROM base AS build-triton
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/triton
RUN git clone https://github.com/ROCm/triton.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/improve_fa_decode_3.0.0^{commit}' || git rev-parse --verify 'improve_fa_decode_3.0.0^{commit}')" \
 && echo "triton https://github.com/ROCm/triton.git $(git rev-parse HEAD)" > /src/triton.source
WORKDIR /src/triton/python
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/triton.source /wheels/triton.source

# ---- aiter: https://github.com/ROCm/aiter.git @ a02a93ddde3176815df0ef09122ae20d0aa198d5 (v0.1.2)
FROM base AS build-aiter
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/aiter
RUN git clone https://github.com/ROCm/aiter.git . \
 && git checkout --detach a02a93ddde3176815df0ef09122ae20d0aa198d5 \
 && { test "$(git rev-parse 'refs/tags/v0.1.2^{commit}')" = "a02a93ddde3176815df0ef09122ae20d0aa198d5" \
      || { echo "tag v0.1.2 no longer points at a02a93ddde3176815df0ef09122ae20d0aa198d5: the stack pin needs review" >&2; exit 1; }; } \
 && git submodule update --init --recursive \
 && echo "aiter https://github.com/ROCm/aiter.git $(git rev-parse HEAD)" > /src/aiter.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements.txt
ENV PREBUILD_KERNELS="1"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/aiter.source /wheels/aiter.source

# ---- vllm: https://github.com/RLFoundation/vllm-patch.git @ 247322c1081df540e7c65a5bd3c9511c475fa985
FROM base AS build-vllm
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/vllm
RUN git clone https://github.com/RLFoundation/vllm-patch.git . \
 && git checkout --detach 247322c1081df540e7c65a5bd3c9511c475fa985 \
 && echo "vllm https://github.com/RLFoundation/vllm-patch.git $(git rev-parse HEAD)" > /src/vllm.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements/rocm.txt
ENV VLLM_TARGET_DEVICE="rocm" \
    ROCM_PATH="/opt/rocm" \
    SETUPTOOLS_SCM_PRETEND_VERSION="0.8.5.dev"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/vllm.source /wheels/vllm.source

# ---- torch-memory-saver: https://github.com/YangWang92/torch_memory_saver_numa.git @ numa
# WARNING: MUTABLE ref numa: a branch head of a fork, which moves; no published file names the commit the recipe built
FROM base AS build-torch-memory-saver
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/torch-memory-saver
RUN git clone https://github.com/YangWang92/torch_memory_saver_numa.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/numa^{commit}' || git rev-parse --verify 'numa^{commit}')" \
 && echo "torch-memory-saver https://github.com/YangWang92/torch_memory_saver_numa.git $(git rev-parse HEAD)" > /src/torch-memory-saver.source
ENV CFLAGS="-D__HIP_PLATFORM_AMD__" \
    CXXFLAGS="-D__HIP_PLATFORM_AMD__"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/torch-memory-saver.source /wheels/torch-memory-saver.source

# ---- verl: https://github.com/volcengine/verl.git @ e95bd9edf206ee6028b3e0a62221c6fa67931898
FROM base AS build-verl
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/verl
RUN git clone https://github.com/volcengine/verl.git . \
 && git checkout --detach e95bd9edf206ee6028b3e0a62221c6fa67931898 \
 && echo "verl https://github.com/volcengine/verl.git $(git rev-parse HEAD)" > /src/verl.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/verl.source /wheels/verl.source

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=bind,from=build-transformer-engine,source=/wheels,target=/tmp/wheels/transformer-engine \
    --mount=type=bind,from=build-vllm-rocm-fork,source=/wheels,target=/tmp/wheels/vllm-rocm-fork \
    --mount=type=bind,from=build-sgl-kernel,source=/wheels,target=/tmp/wheels/sgl-kernel \
    --mount=type=bind,from=build-sglang,source=/wheels,target=/tmp/wheels/sglang \
    --mount=type=bind,from=build-triton,source=/wheels,target=/tmp/wheels/triton \
    --mount=type=bind,from=build-aiter,source=/wheels,target=/tmp/wheels/aiter \
    --mount=type=bind,from=build-vllm,source=/wheels,target=/tmp/wheels/vllm \
    --mount=type=bind,from=build-torch-memory-saver,source=/wheels,target=/tmp/wheels/torch-memory-saver \
    --mount=type=bind,from=build-verl,source=/wheels,target=/tmp/wheels/verl \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/transformer-engine/*.whl /tmp/wheels/sgl-kernel/*.whl /tmp/wheels/sglang/*.whl /tmp/wheels/triton/*.whl /tmp/wheels/aiter/*.whl /tmp/wheels/vllm/*.whl /tmp/wheels/torch-memory-saver/*.whl /tmp/wheels/verl/*.whl 'ray[data,train,tune,serve]==2.47.1' tensordict==0.9.1 packaging==25.0 transformers==4.51.1 \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
RUN rocmkit vf-configs --strict
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-rocm6","description":"verl 0.4.1-era ROCm 6.3.4 recipe for MI300X: verl 0.5.0.dev with vLLM 0.8.5 sleep/NUMA patch and SGLang 0.4.6.post5","targets":["gfx942"],"rocm":"6.3.4","python":"3.12","base_image":"rocm/dev-ubuntu-22.04:6.3.4-complete","base_image_overridden":false,"base_pip":["torch==2.6.0+rocm6.2.4","torchvision==0.21.0+rocm6.2.4","torchaudio==2.6.0+rocm6.2.4","setuptools==75.8.0","wheel==0.45.1","packaging==24.2","ninja==1.11.1.3","cmake==3.31.6","pybind11==2.13.6","setuptools-scm==8.1.0","psutil==7.0.0"],"base_pip_sources":["https://download.pytorch.org/whl/rocm6.2.4"],"components":[{"name":"transformer-engine","kind":"git","git":"https://github.com/ROCm/TransformerEngine.git","commit":null,"tag":null,"mutable_ref":"236178e5","mutable_reason":"verl'"'"'s recipe names only this 8-digit prefix, and no published file names the full commit","needs":[]},{"name":"vllm-rocm-fork","kind":"git","git":"https://github.com/ROCm/vllm.git","commit":"113274a0e740ac779ac713de643e12856b10ce05","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sgl-kernel","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"7e257cd666c0d639626487987ea8e590da1e9395","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sglang","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"7e257cd666c0d639626487987ea8e590da1e9395","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":["sgl-kernel","vllm-rocm-fork"]},{"name":"triton","kind":"git","git":"https://github.com/ROCm/triton.git","commit":null,"tag":null,"mutable_ref":"improve_fa_decode_3.0.0","mutable_reason":"a branch head, which moves; no published file names the commit the recipe built","needs":[]},{"name":"aiter","kind":"git","git":"https://github.com/ROCm/aiter.git","commit":"a02a93ddde3176815df0ef09122ae20d0aa198d5","tag":"v0.1.2","mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"vllm","kind":"git","git":"https://github.com/RLFoundation/vllm-patch.git","commit":"247322c1081df540e7c65a5bd3c9511c475fa985","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"torch-memory-saver","kind":"git","git":"https://github.com/YangWang92/torch_memory_saver_numa.git","commit":null,"tag":null,"mutable_ref":"numa","mutable_reason":"a branch head of a fork, which moves; no published file names the commit the recipe built","needs":[]},{"name":"verl","kind":"git","git":"https://github.com/volcengine/verl.git","commit":"e95bd9edf206ee6028b3e0a62221c6fa67931898","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"ray","kind":"pip","requirements":["ray[data,train,tune,serve]==2.47.1"],"no_deps":false},{"name":"tensordict","kind":"pip","requirements":["tensordict==0.9.1","packaging==25.0"],"no_deps":false},{"name":"transformers","kind":"pip","requirements":["transformers==4.51.1"],"no_deps":false}],"runtime_env":{"HIP_FORCE_DEV_KERNARG":"1","HSA_NO_SCRATCH_RECLAIM":"1","SGLANG_SET_CPU_AFFINITY":"1","SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN":"1","NCCL_MIN_NCHANNELS":"112","MOE_PADDING":"1","VLLM_FP8_PADDING":"1","VLLM_FP8_ACT_PADDING":"1","VLLM_FP8_WEIGHT_PADDING":"1","VLLM_FP8_REDUCE_CONV":"1","TORCHINDUCTOR_MAX_AUTOTUNE":"1","TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE":"1","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"inputs_hash":"a6c35a6a90012bafab0d94bf34858e079550264760dfd9b98edc06369be740fa"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# verl Dockerfile.rocm ENV block: kernel arguments in device memory
ENV HIP_FORCE_DEV_KERNARG="1"
# verl Dockerfile.rocm ENV block
ENV HSA_NO_SCRATCH_RECLAIM="1"
# verl Dockerfile.rocm ENV block
ENV SGLANG_SET_CPU_AFFINITY="1"
# verl Dockerfile.rocm ENV block
ENV SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1"
# verl Dockerfile.rocm ENV block: RCCL channel count for MI300X XGMI
ENV NCCL_MIN_NCHANNELS="112"
# verl Dockerfile.rocm ENV block
ENV MOE_PADDING="1"
# verl Dockerfile.rocm ENV block
ENV VLLM_FP8_PADDING="1"
# verl Dockerfile.rocm ENV block
ENV VLLM_FP8_ACT_PADDING="1"
# verl Dockerfile.rocm ENV block
ENV VLLM_FP8_WEIGHT_PADDING="1"
# verl Dockerfile.rocm ENV block
ENV VLLM_FP8_REDUCE_CONV="1"
# verl Dockerfile.rocm ENV block
ENV TORCHINDUCTOR_MAX_AUTOTUNE="1"
# verl Dockerfile.rocm ENV block
ENV TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE="1"
# Ray 2.47.1 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-rocm6" \
    org.opencontainers.image.description="verl 0.4.1-era ROCm 6.3.4 recipe for MI300X: verl 0.5.0.dev with vLLM 0.8.5 sleep/NUMA patch and SGLang 0.4.6.post5" \
    org.opencontainers.image.version="rocm6.3.4-gfx942-a6c35a6a9001" \
    org.opencontainers.image.base.name="rocm/dev-ubuntu-22.04:6.3.4-complete" \
    io.rocmkit.stack="verl-rocm6" \
    io.rocmkit.targets="gfx942" \
    io.rocmkit.rocm="6.3.4" \
    io.rocmkit.python="3.12" \
    io.rocmkit.inputs-hash="a6c35a6a90012bafab0d94bf34858e079550264760dfd9b98edc06369be740fa" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.47.1" \
    io.rocmkit.mutable-components="transformer-engine,triton,torch-memory-saver"
