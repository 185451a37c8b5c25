# Rendered by rocmkit from stack verl-sglang-rocm10 for gfx950. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl + SGLang 0.5.19 rollout on ROCm 10.0 from pip (TheRock SDK, torch 2.11) with sgl-kernel, aiter and torch_memory_saver built from source
#
# Build with `rocmkit build --stack verl-sglang-rocm10 --arch gfx950` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM ubuntu:24.04 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' build-essential ca-certificates ccache git libnuma-dev libstdc++-12-dev pkg-config python3 python3-dev python3-venv | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
 && if [ -n "$missing" ]; then \
      apt-get update && echo "$missing" | xargs apt-get install -y --no-install-recommends && rm -rf /var/lib/apt/lists/*; fi
# A venv that still sees the image's own packages, so a base image's ROCm PyTorch stays in use.
RUN python3.12 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v == "3.12", "stack wants Python 3.12, image has " + v'
ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv
# ROCm from pip wheels (TheRock) into this Python: the SDK, and the device payload of each target.
# SGLang docker/rocm.Dockerfile@004ae46f rocm1000-base: TheRock 10.0.0 and AMD's torch 2.11.0 for it from stable.repo.amd.com/rocm/whl-next/
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --extra-index-url https://stable.repo.amd.com/rocm/whl-next/ rocm-sdk-core==10.0.0 rocm-sdk-libraries==10.0.0 rocm-sdk-devel==10.0.0 torch==2.11.0+rocm10.0.0 torchvision==0.26.0+rocm10.0.0 torchaudio==2.11.0+rocm10.0.0 triton==3.8.0+git4cff872c.rocm10.0.0 rocm-sdk-device-gfx950==10.0.0 amd-torch-device-gfx950==2.11.0+rocm10.0.0 amd-torchvision-device-gfx950==0.26.0+rocm10.0.0
# ---- ROCm from pip (TheRock): the fix-ups SGLang's, vLLM's and AMD's verl images apply to it
# _rocm_sdk_devel (headers, cmake files, the ROCM_PATH tree) ships packed: `rocm-sdk init` expands it, and
# must run again after a device wheel is added (ROCm/TheRock RELEASES.md; SGLang docker/rocm.Dockerfile).
RUN python -m rocm_sdk init
# /opt/rocm is the SDK's root as `rocm_sdk path --root` reports it, so what looks for ROCm there finds it (AITER
# runs /opt/rocm/llvm/bin/amdgpu-arch; SGLang docker/rocm.Dockerfile). An image that has one keeps it.
RUN root="$(python -m rocm_sdk path --root)" \
 && if [ ! -e /opt/rocm ]; then ln -s "$root" /opt/rocm; fi
# Two copies of libamd_smi in one process (core's, which HIP loads by RPATH, and devel's, which the amdsmi
# package finds through ROCM_PATH) keep separate state: the second to start sees no GPU, so torch and Ray
# count 0 (pytorch/pytorch#186516, ROCm/rocm-systems#7643). Each regular file of devel's becomes a link to
# core's, as SGLang docker/rocm.Dockerfile does; AMD's verl turns rocm_sdk's RTLD_GLOBAL preload off with sed
# instead, which edits installed code and does nothing once that line changes.
RUN core="$(python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("_rocm_sdk_core").origin))')" \
 && devel="$(python -m rocm_sdk path --root)" \
 && lib="$(find "$core/lib" -maxdepth 1 -type f -name 'libamd_smi.so*' | sort | head -n 1)" \
 && for f in "$devel"/lib/libamd_smi.so*; do \
      if [ -n "$lib" ] && [ -f "$f" ] && [ ! -L "$f" ]; then ln -sf "$lib" "$f" && echo "libamd_smi: $f -> $lib"; fi; done
# The SDK's hsakmtTargets.cmake names /usr/lib64/libc.so, from the machine it was built on; Debian and Ubuntu
# keep it in /lib/x86_64-linux-gnu, so a cmake build that finds hsakmt stops on a missing file (SGLang
# docker/rocm.Dockerfile, vLLM docker/Dockerfile.rock_base).
RUN if [ ! -e /usr/lib64/libc.so ] && [ -e /lib/x86_64-linux-gnu/libc.so ]; then \
      mkdir -p /usr/lib64 && ln -s /lib/x86_64-linux-gnu/libc.so /usr/lib64/libc.so; fi
# TheRock ships libamd_smi but not the amdsmi package (ROCm/TheRock#3054), and Ray counts AMD GPUs through it:
# without it Ray sees 0 GPUs. Installed from _rocm_sdk_core/share/amd_smi, the copy matching this SDK (AMD's
# verl docker/rocm/Dockerfile.rocm@af69c3f1), not PyPI's amdsmi, which pins another ROCm.
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    core="$(python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("_rocm_sdk_core").origin))')" \
 && cp -r "$core/share/amd_smi" /tmp/rocmkit-amd_smi && python -m pip install --no-deps /tmp/rocmkit-amd_smi \
 && rm -rf /tmp/rocmkit-amd_smi
# ---- end of the pip ROCm fix-ups (the torch family is held by the pip constraint file below, as
# SGLang's and vLLM's PIP_CONSTRAINT do; ROCm 10's pip libdrm has the amdgpu.ids table built in)
ENV ROCM_PATH=/opt/rocm \
    ROCM_HOME=/opt/rocm \
    HIP_DEVICE_LIB_PATH=/opt/rocm/lib/llvm/amdgcn/bitcode
# ROCm's compilers and tools (hipcc, amdclang) on PATH: build scripts look for hipcc there to pick HIP over CUDA.
ENV PATH=/opt/rocm/bin:/opt/rocm/lib/llvm/bin:$PATH
# vLLM and SGLang link -lamdhip64 from the default path (vllm-project/vllm#12695); without amdgpu.ids
# hipDeviceGetName reports "AMD Radeon Graphics" and tuned configs are not found (sgl-project/sglang PR #30984).
RUN ln -sf /opt/rocm/lib/libamdhip64.so /usr/lib/libamdhip64.so \
 && if [ -f /opt/amdgpu/share/libdrm/amdgpu.ids ] && [ ! -f /usr/share/libdrm/amdgpu.ids ]; then \
      mkdir -p /usr/share/libdrm && ln -s /opt/amdgpu/share/libdrm/amdgpu.ids /usr/share/libdrm/amdgpu.ids; fi
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install setuptools==79.0.1 wheel==0.45.1 packaging==25.0 ninja==1.11.1.4 cmake==3.31.6 pybind11==2.13.6 setuptools-scm==8.3.1 psutil==7.0.0
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# The stack's exact pins first, then what the image installed of the rest.
RUN mkdir -p /opt/rocmkit \
 && printf '%s\n' rocm-sdk-core==10.0.0 rocm-sdk-libraries==10.0.0 rocm-sdk-devel==10.0.0 torch==2.11.0+rocm10.0.0 torchvision==0.26.0+rocm10.0.0 torchaudio==2.11.0+rocm10.0.0 triton==3.8.0+git4cff872c.rocm10.0.0 rocm-sdk-device-gfx950==10.0.0 amd-torch-device-gfx950==2.11.0+rocm10.0.0 amd-torchvision-device-gfx950==0.26.0+rocm10.0.0 > /opt/rocmkit/constraints.txt
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

# ---- aiter: https://github.com/ROCm/aiter.git @ c16d44b93a528b2a4bfd6d8d3409116d465872a9
FROM base AS build-aiter
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/aiter
RUN git clone https://github.com/ROCm/aiter.git . \
 && git checkout --detach c16d44b93a528b2a4bfd6d8d3409116d465872a9 \
 && git submodule update --init --recursive \
 && echo "aiter https://github.com/ROCm/aiter.git $(git rev-parse HEAD)" > /src/aiter.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install -r requirements.txt
ENV PREBUILD_KERNELS="1" \
    AITER_USE_SYSTEM_TRITON="1"
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup.py bdist_wheel --dist-dir /wheels \
 && cp /src/aiter.source /wheels/aiter.source

# ---- sgl-kernel: https://github.com/sgl-project/sglang.git @ 0bcd822377da7b5718e674eaf9c870d349424dd1 (v0.5.19)
FROM base AS build-sgl-kernel
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sgl-kernel
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 0bcd822377da7b5718e674eaf9c870d349424dd1 \
 && { test "$(git rev-parse 'refs/tags/v0.5.19^{commit}')" = "0bcd822377da7b5718e674eaf9c870d349424dd1" \
      || { echo "tag v0.5.19 no longer points at 0bcd822377da7b5718e674eaf9c870d349424dd1: the stack pin needs review" >&2; exit 1; }; } \
 && echo "sgl-kernel https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sgl-kernel.source
WORKDIR /src/sgl-kernel/python/sglang/kernels/aot
RUN cp pyproject_rocm.toml pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup_rocm.py bdist_wheel --dist-dir /wheels \
 && cp /src/sgl-kernel.source /wheels/sgl-kernel.source

# ---- sglang: https://github.com/sgl-project/sglang.git @ 0bcd822377da7b5718e674eaf9c870d349424dd1 (v0.5.19)
FROM base AS build-sglang
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sglang
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 0bcd822377da7b5718e674eaf9c870d349424dd1 \
 && { test "$(git rev-parse 'refs/tags/v0.5.19^{commit}')" = "0bcd822377da7b5718e674eaf9c870d349424dd1" \
      || { echo "tag v0.5.19 no longer points at 0bcd822377da7b5718e674eaf9c870d349424dd1: the stack pin needs review" >&2; exit 1; }; } \
 && echo "sglang https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sglang.source
RUN --mount=type=bind,from=build-sgl-kernel,source=/wheels,target=/deps/sgl-kernel \
    pip install --no-cache-dir --no-deps /deps/sgl-kernel/*.whl
WORKDIR /src/sglang/python
RUN cp pyproject_other.toml pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
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
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/torch-memory-saver.source /wheels/torch-memory-saver.source

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
RUN --mount=type=bind,from=build-aiter,source=/wheels,target=/tmp/wheels/aiter \
    --mount=type=bind,from=build-sgl-kernel,source=/wheels,target=/tmp/wheels/sgl-kernel \
    --mount=type=bind,from=build-sglang,source=/wheels,target=/tmp/wheels/sglang \
    --mount=type=bind,from=build-torch-memory-saver,source=/wheels,target=/tmp/wheels/torch-memory-saver \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/aiter/*.whl /tmp/wheels/sgl-kernel/*.whl "$(echo /tmp/wheels/sglang/*.whl)[srt_hip_torch2_11]" /tmp/wheels/torch-memory-saver/*.whl 'ray[default,serve]==2.58.0' verl==0.9.1 \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
RUN rocmkit vf-configs --strict
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-sglang-rocm10","description":"verl + SGLang 0.5.19 rollout on ROCm 10.0 from pip (TheRock SDK, torch 2.11) with sgl-kernel, aiter and torch_memory_saver built from source","targets":["gfx950"],"rocm":"10.0.0","python":"3.12","base_image":"ubuntu:24.04","base_image_overridden":false,"base_pip":["setuptools==79.0.1","wheel==0.45.1","packaging==25.0","ninja==1.11.1.4","cmake==3.31.6","pybind11==2.13.6","setuptools-scm==8.3.1","psutil==7.0.0"],"base_pip_sources":[],"components":[{"name":"aiter","kind":"git","git":"https://github.com/ROCm/aiter.git","commit":"c16d44b93a528b2a4bfd6d8d3409116d465872a9","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sgl-kernel","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"0bcd822377da7b5718e674eaf9c870d349424dd1","tag":"v0.5.19","mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sglang","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"0bcd822377da7b5718e674eaf9c870d349424dd1","tag":"v0.5.19","mutable_ref":null,"mutable_reason":null,"needs":["sgl-kernel"]},{"name":"torch-memory-saver","kind":"git","git":"https://github.com/fzyzcjy/torch_memory_saver.git","commit":"f05a8754daf68238d54e4cf31cb3ba866684bbaf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"ray","kind":"pip","requirements":["ray[default,serve]==2.58.0"],"no_deps":false},{"name":"verl","kind":"pip","requirements":["verl==0.9.1"],"no_deps":false}],"runtime_env":{"HIP_FORCE_DEV_KERNARG":"1","HSA_NO_SCRATCH_RECLAIM":"1","HSA_ENABLE_IPC_MODE_LEGACY":"1","NCCL_MIN_NCHANNELS":"112","SGLANG_USE_AITER":"1","SGLANG_SET_CPU_AFFINITY":"1","SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN":"1","TOKENIZERS_PARALLELISM":"false","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"base_rocm_wheels":{"requirements":["rocm-sdk-core==10.0.0","rocm-sdk-libraries==10.0.0","rocm-sdk-devel==10.0.0","torch==2.11.0+rocm10.0.0","torchvision==0.26.0+rocm10.0.0","torchaudio==2.11.0+rocm10.0.0","triton==3.8.0+git4cff872c.rocm10.0.0","rocm-sdk-device-gfx950==10.0.0","amd-torch-device-gfx950==2.11.0+rocm10.0.0","amd-torchvision-device-gfx950==0.26.0+rocm10.0.0"],"sources":["https://stable.repo.amd.com/rocm/whl-next/"]},"constraints":{"path":"/opt/rocmkit/constraints.txt","pins":["rocm-sdk-core==10.0.0","rocm-sdk-libraries==10.0.0","rocm-sdk-devel==10.0.0","torch==2.11.0+rocm10.0.0","torchvision==0.26.0+rocm10.0.0","torchaudio==2.11.0+rocm10.0.0","triton==3.8.0+git4cff872c.rocm10.0.0","rocm-sdk-device-gfx950==10.0.0","amd-torch-device-gfx950==2.11.0+rocm10.0.0","amd-torchvision-device-gfx950==0.26.0+rocm10.0.0"]},"inputs_hash":"4d45b0d13a762e8f82f0b719c81e05880651cd92aca9f047303f403afc016904"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# kernel arguments in device memory: lower launch latency (SGLang rocm.Dockerfile runtime ENV)
ENV HIP_FORCE_DEV_KERNARG="1"
# scratch memory kept, not reclaimed (SGLang rocm.Dockerfile runtime ENV; verl Dockerfile.rocm@af69c3f1 line 42)
ENV HSA_NO_SCRATCH_RECLAIM="1"
# rocmkit's addition: dma-buf IPC leaked exported VRAM in colocated rollouts from ROCm 7.2 (radixark/miles #1707); no ROCm 10.0 release note says the fix (ROCm/rocm-systems #6151, #6407) is in it
ENV HSA_ENABLE_IPC_MODE_LEGACY="1"
# RCCL channel count for MI300X/MI355X XGMI (SGLang rocm.Dockerfile runtime ENV; verl Dockerfile.rocm@af69c3f1 line 41)
ENV NCCL_MIN_NCHANNELS="112"
# route SGLang kernels through the aiter built here (SGLang rocm.Dockerfile); with 0 SGLang's HIP RMSNorm calls vLLM's kernels, and this image has no vLLM
ENV SGLANG_USE_AITER="1"
# bind SGLang workers to the GPU NUMA node (SGLang rocm.Dockerfile runtime ENV)
ENV SGLANG_SET_CPU_AFFINITY="1"
# allow context lengths above the model config (SGLang rocm.Dockerfile runtime ENV)
ENV SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1"
# tokenizer threads and fork() in Ray workers do not mix (vLLM and verl ROCm images)
ENV TOKENIZERS_PARALLELISM="false"
# Ray 2.58.0 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-sglang-rocm10" \
    org.opencontainers.image.description="verl + SGLang 0.5.19 rollout on ROCm 10.0 from pip (TheRock SDK, torch 2.11) with sgl-kernel, aiter and torch_memory_saver built from source" \
    org.opencontainers.image.version="rocm10.0.0-gfx950-4d45b0d13a76" \
    org.opencontainers.image.base.name="ubuntu:24.04" \
    io.rocmkit.stack="verl-sglang-rocm10" \
    io.rocmkit.targets="gfx950" \
    io.rocmkit.rocm="10.0.0" \
    io.rocmkit.python="3.12" \
    io.rocmkit.inputs-hash="4d45b0d13a762e8f82f0b719c81e05880651cd92aca9f047303f403afc016904" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.58.0"
