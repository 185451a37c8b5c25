# Rendered by rocmkit from stack verl-rocm10 for gfx950. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl 0.9.0.amd0 + vLLM 0.27 rollout on ROCm 10.0 (rocm/primus:v26.7: pip ROCm SDK, torch 2.12, TE, aiter prebuilt), vLLM built from source
#
# Build with `rocmkit build --stack verl-rocm10 --arch gfx950` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: component vllm is MUTABLE: built from 'v0.27.0', not a commit (a tag whose commit no source read for this stack records (vllm-project/vllm is too large to copy); the build records the commit it checked out in /opt/rocmkit/sources.txt); two builds of this stack may differ
# WARNING: component flash-linear-attention is MUTABLE: built from 'main', not a commit (the recipe installs the head of main (2026-09); the fla-org history available ends 2026-08-22 (bc3b101d), before the recipe, so no commit can be named); two builds of this stack may differ
# WARNING: component mbridge is MUTABLE: built from 'main', not a commit (the recipe installs the head of main (2026-09); the ISEEKYAN/mbridge history available ends 2026-06-12, before even a61943d7, the commit verl's 2026-07 recipe pins); two builds of this stack may differ
# WARNING: base component triton is MUTABLE: the build records the base's triton in its base-versions file but cannot check it (AMD's verl 26.09 docs do not give the Triton version of rocm/primus:v26.7); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)
# WARNING: base component transformer-engine is MUTABLE: the build records the base's transformer_engine in its base-versions file but cannot check it (AMD's verl 26.09 docs say TransformerEngine is prebuilt in rocm/primus:v26.7 but give no version); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)
# WARNING: base component aiter is MUTABLE: the build records the base's amd-aiter in its base-versions file but cannot check it (AMD's verl 26.09 docs say aiter is prebuilt in rocm/primus:v26.7 but give no version); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/primus:v26.7 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 10.0.0; torch at the release the stack declares; triton, transformer-engine, aiter recorded, not checked (MUTABLE).
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
RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 10.0.0 torch torch release:2.12.0 triton triton - transformer-engine transformer_engine - aiter amd-aiter -
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
# ---- ROCm from pip (TheRock): the fix-ups SGLang's, vLLM's and AMD's verl images apply to it
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
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install setuptools-scm==8.3.1
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# Likewise what the stack declares the base provides, at the versions the first step read.
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio|triton|transformer[-_.]engine|amd[-_.]aiter)==' || true; } > /opt/rocmkit/constraints.txt
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

# ---- vllm: https://github.com/vllm-project/vllm.git @ v0.27.0
# WARNING: MUTABLE ref v0.27.0: a tag whose commit no source read for this stack records (vllm-project/vllm is too large to copy); the build records the commit it checked out in /opt/rocmkit/sources.txt
FROM base AS build-vllm
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/vllm
RUN git clone https://github.com/vllm-project/vllm.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/v0.27.0^{commit}' || git rev-parse --verify 'v0.27.0^{commit}')" \
 && echo "vllm https://github.com/vllm-project/vllm.git $(git rev-parse HEAD)" > /src/vllm.source
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

# ---- verl: https://github.com/AMD-Ecosystem/verl.git @ af69c3f11c1c7978bedf2434de79b237aa59c1bb
FROM base AS build-verl
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/verl
RUN git clone https://github.com/AMD-Ecosystem/verl.git . \
 && git checkout --detach af69c3f11c1c7978bedf2434de79b237aa59c1bb \
 && git submodule update --init --recursive \
 && echo "verl https://github.com/AMD-Ecosystem/verl.git $(git rev-parse HEAD)" > /src/verl.source
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

# ---- flash-linear-attention: https://github.com/fla-org/flash-linear-attention.git @ main
# WARNING: MUTABLE ref main: the recipe installs the head of main (2026-09); the fla-org history available ends 2026-08-22 (bc3b101d), before the recipe, so no commit can be named
FROM base AS build-flash-linear-attention
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/flash-linear-attention
RUN git clone https://github.com/fla-org/flash-linear-attention.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/main^{commit}' || git rev-parse --verify 'main^{commit}')" \
 && echo "flash-linear-attention https://github.com/fla-org/flash-linear-attention.git $(git rev-parse HEAD)" > /src/flash-linear-attention.source
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && cp /src/flash-linear-attention.source /wheels/flash-linear-attention.source

# ---- mbridge: https://github.com/ISEEKYAN/mbridge.git @ main
# WARNING: MUTABLE ref main: the recipe installs the head of main (2026-09); the ISEEKYAN/mbridge history available ends 2026-06-12, before even a61943d7, the commit verl's 2026-07 recipe pins
FROM base AS build-mbridge
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/mbridge
RUN git clone https://github.com/ISEEKYAN/mbridge.git . \
 && git checkout --detach "$(git rev-parse --verify -q 'origin/main^{commit}' || git rev-parse --verify 'main^{commit}')" \
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
RUN --mount=type=bind,from=build-vllm,source=/wheels,target=/tmp/wheels/vllm \
    --mount=type=bind,from=build-verl,source=/wheels,target=/tmp/wheels/verl \
    --mount=type=bind,from=build-flash-linear-attention,source=/wheels,target=/tmp/wheels/flash-linear-attention \
    --mount=type=bind,from=build-mbridge,source=/wheels,target=/tmp/wheels/mbridge \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install /tmp/wheels/vllm/*.whl /tmp/wheels/verl/*.whl /tmp/wheels/flash-linear-attention/*.whl /tmp/wheels/mbridge/*.whl megatron-core==0.18.0 transformers==5.12.1 accelerate==1.14.0 mathruler==0.1.0 qwen_vl_utils==0.0.14 TransferQueue==0.1.8 codetiming==1.4.0 pylatexenc==2.11 mistral-common==1.13.1 model-hosting-container-standards==0.1.16 gguf==0.19.0 cupy-rocm-7-0==14.1.1 torchao==0.16.0 'ray[default,serve]==2.58.0' \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The components the base provides are still the ones its check read: no install above replaced them.
RUN python /opt/rocmkit/basecheck.py final torch torch release:2.12.0 triton triton - transformer-engine transformer_engine - aiter amd-aiter -
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-rocm10","description":"verl 0.9.0.amd0 + vLLM 0.27 rollout on ROCm 10.0 (rocm/primus:v26.7: pip ROCm SDK, torch 2.12, TE, aiter prebuilt), vLLM built from source","targets":["gfx950"],"rocm":"10.0.0","python":"3.12","base_image":"rocm/primus:v26.7","base_image_overridden":false,"base_pip":["setuptools-scm==8.3.1"],"base_pip_sources":[],"components":[{"name":"vllm","kind":"git","git":"https://github.com/vllm-project/vllm.git","commit":null,"tag":null,"mutable_ref":"v0.27.0","mutable_reason":"a tag whose commit no source read for this stack records (vllm-project/vllm is too large to copy); the build records the commit it checked out in /opt/rocmkit/sources.txt","needs":[]},{"name":"verl","kind":"git","git":"https://github.com/AMD-Ecosystem/verl.git","commit":"af69c3f11c1c7978bedf2434de79b237aa59c1bb","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[],"branch":"release/0.9.0.amd0","patches":[{"file":"patches/verl-rocm-rollout-defaults.patch","sha256":"690c137b013199f3d1462a18d801810dcb17b4b0524be1167ff180397a8af57a"}]},{"name":"flash-linear-attention","kind":"git","git":"https://github.com/fla-org/flash-linear-attention.git","commit":null,"tag":null,"mutable_ref":"main","mutable_reason":"the recipe installs the head of main (2026-09); the fla-org history available ends 2026-08-22 (bc3b101d), before the recipe, so no commit can be named","needs":[]},{"name":"mbridge","kind":"git","git":"https://github.com/ISEEKYAN/mbridge.git","commit":null,"tag":null,"mutable_ref":"main","mutable_reason":"the recipe installs the head of main (2026-09); the ISEEKYAN/mbridge history available ends 2026-06-12, before even a61943d7, the commit verl'"'"'s 2026-07 recipe pins","needs":[]},{"name":"qwen35-extras","kind":"pip","requirements":["megatron-core==0.18.0","transformers==5.12.1","accelerate==1.14.0","mathruler==0.1.0","qwen_vl_utils==0.0.14","TransferQueue==0.1.8","codetiming==1.4.0","pylatexenc==2.11","mistral-common==1.13.1","model-hosting-container-standards==0.1.16"],"no_deps":false},{"name":"vllm-extras","kind":"pip","requirements":["gguf==0.19.0"],"no_deps":false},{"name":"cupy","kind":"pip","requirements":["cupy-rocm-7-0==14.1.1"],"no_deps":false},{"name":"torchao","kind":"pip","requirements":["torchao==0.16.0"],"no_deps":false},{"name":"ray","kind":"pip","requirements":["ray[default,serve]==2.58.0"],"no_deps":false}],"runtime_env":{"VLLM_ROCM_USE_AITER":"1","VLLM_FP8_PADDING":"1","VLLM_FP8_ACT_PADDING":"1","VLLM_FP8_WEIGHT_PADDING":"1","VLLM_FP8_REDUCE_CONV":"1","VLLM_WORKER_MULTIPROC_METHOD":"spawn","NCCL_MIN_NCHANNELS":"112","HSA_NO_SCRATCH_RECLAIM":"1","HIP_FORCE_DEV_KERNARG":"1","HSA_ENABLE_IPC_MODE_LEGACY":"1","TOKENIZERS_PARALLELISM":"false","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"base_provides":[{"name":"torch","distribution":"torch","version":null,"release":"2.12.0"},{"name":"triton","distribution":"triton","version":null,"mutable_reason":"AMD'"'"'s verl 26.09 docs do not give the Triton version of rocm/primus:v26.7"},{"name":"transformer-engine","distribution":"transformer_engine","version":null,"mutable_reason":"AMD'"'"'s verl 26.09 docs say TransformerEngine is prebuilt in rocm/primus:v26.7 but give no version"},{"name":"aiter","distribution":"amd-aiter","version":null,"mutable_reason":"AMD'"'"'s verl 26.09 docs say aiter is prebuilt in rocm/primus:v26.7 but give no version"}],"inputs_hash":"f7b178d8f42e1e094cf14d69949ba9de4c176e17a9e299b159e391c42df0d15a"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# vLLM's AITER kernels (verl Dockerfile.rocm@af69c3f1 line 33)
ENV VLLM_ROCM_USE_AITER="1"
# verl Dockerfile.rocm@af69c3f1 line 34
ENV VLLM_FP8_PADDING="1"
# verl Dockerfile.rocm@af69c3f1 line 35
ENV VLLM_FP8_ACT_PADDING="1"
# verl Dockerfile.rocm@af69c3f1 line 36
ENV VLLM_FP8_WEIGHT_PADDING="1"
# verl Dockerfile.rocm@af69c3f1 line 37
ENV VLLM_FP8_REDUCE_CONV="1"
# vLLM workers started by spawn, not fork (verl Dockerfile.rocm@af69c3f1 line 38)
ENV VLLM_WORKER_MULTIPROC_METHOD="spawn"
# RCCL channel count for MI300X/MI355X XGMI (verl Dockerfile.rocm@af69c3f1 line 41)
ENV NCCL_MIN_NCHANNELS="112"
# scratch memory kept, not reclaimed (verl Dockerfile.rocm@af69c3f1 line 42)
ENV HSA_NO_SCRATCH_RECLAIM="1"
# kernel arguments in device memory: lower launch latency (verl Dockerfile.rocm@af69c3f1 line 43)
ENV HIP_FORCE_DEV_KERNARG="1"
# rocmkit's addition: dma-buf IPC leaked exported VRAM in colocated rollouts from ROCm 7.2 (radixark/miles #1707); no ROCm 10.0 release note says the fix (ROCm/rocm-systems #6151, #6407) is in it
ENV HSA_ENABLE_IPC_MODE_LEGACY="1"
# rocmkit's addition: tokenizer threads and fork() in Ray workers do not mix (vLLM docker/Dockerfile.rocm final ENV)
ENV TOKENIZERS_PARALLELISM="false"
# Ray 2.58.0 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-rocm10" \
    org.opencontainers.image.description="verl 0.9.0.amd0 + vLLM 0.27 rollout on ROCm 10.0 (rocm/primus:v26.7: pip ROCm SDK, torch 2.12, TE, aiter prebuilt), vLLM built from source" \
    org.opencontainers.image.version="rocm10.0.0-gfx950-f7b178d8f42e" \
    org.opencontainers.image.base.name="rocm/primus:v26.7" \
    io.rocmkit.stack="verl-rocm10" \
    io.rocmkit.targets="gfx950" \
    io.rocmkit.rocm="10.0.0" \
    io.rocmkit.python="3.12" \
    io.rocmkit.inputs-hash="f7b178d8f42e1e094cf14d69949ba9de4c176e17a9e299b159e391c42df0d15a" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.58.0" \
    io.rocmkit.base-provides="torch=2.12.0.*,triton=MUTABLE,transformer-engine=MUTABLE,aiter=MUTABLE" \
    io.rocmkit.mutable-components="vllm,flash-linear-attention,mbridge,triton,transformer-engine,aiter"
