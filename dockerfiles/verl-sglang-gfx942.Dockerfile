# Rendered by rocmkit from stack verl-sglang for gfx942. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl + SGLang rollout on ROCm 7.2 with sgl-kernel, aiter and torch_memory_saver built from source
#
# Build with `rocmkit build --stack verl-sglang --arch gfx942` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.
# WARNING: base component triton is MUTABLE: the build records the base's triton in its base-versions file but cannot check it (no published file names the Triton of AMD's rocm/pytorch 2.9.1 image for ROCm 7.2); two builds of this stack may differ unless the base is pinned by digest (rocmkit lock)

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM rocm/pytorch:rocm7.2_ubuntu22.04_py3.10_pytorch_release_2.9.1 AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Checked first, before anything is fetched or built, that the base holds what the stack takes from it:
# ROCm 7.2.0; torch at the release the stack declares; triton recorded, not checked (MUTABLE).
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
RUN python3.10 /opt/rocmkit/basecheck.py base rocm - 7.2.0 torch torch release:2.9.1 triton triton -
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
    pip install setuptools==79.0.1 wheel==0.45.1 packaging==25.0 ninja==1.11.1.4 cmake==3.31.6 pybind11==2.13.6 setuptools-scm==8.3.1 psutil==7.0.0
# amdsmi from the image's own ROCm (what vLLM uses to detect AMD GPUs), matching it exactly.
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    cp -r /opt/rocm/share/amd_smi /tmp/amd_smi && pip install /tmp/amd_smi && rm -rf /tmp/amd_smi
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
# Likewise what the stack declares the base provides, at the versions the first step read.
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

# ---- aiter: https://github.com/ROCm/aiter.git @ b5e03ed191fca11ee423226537ef8d9435e432a6
FROM base AS build-aiter
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/aiter
RUN git clone https://github.com/ROCm/aiter.git . \
 && git checkout --detach b5e03ed191fca11ee423226537ef8d9435e432a6 \
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

# ---- sgl-kernel: https://github.com/sgl-project/sglang.git @ 0801cc05ed202544e2e5c67d6b0a1d454de54fca
FROM base AS build-sgl-kernel
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sgl-kernel
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 0801cc05ed202544e2e5c67d6b0a1d454de54fca \
 && echo "sgl-kernel https://github.com/sgl-project/sglang.git $(git rev-parse HEAD)" > /src/sgl-kernel.source
WORKDIR /src/sgl-kernel/sgl-kernel
RUN cp pyproject_rocm.toml pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    --mount=type=cache,target=/root/.cache/ccache \
    export MAX_JOBS NVTE_MAX_BUILD_JOBS="${MAX_JOBS}" CMAKE_BUILD_PARALLEL_LEVEL="${MAX_JOBS}" \
 && python setup_rocm.py bdist_wheel --dist-dir /wheels \
 && cp /src/sgl-kernel.source /wheels/sgl-kernel.source

# ---- sglang: https://github.com/sgl-project/sglang.git @ 0801cc05ed202544e2e5c67d6b0a1d454de54fca
FROM base AS build-sglang
ARG MAX_JOBS
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /src/sglang
RUN git clone https://github.com/sgl-project/sglang.git . \
 && git checkout --detach 0801cc05ed202544e2e5c67d6b0a1d454de54fca \
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
    pip install /tmp/wheels/aiter/*.whl /tmp/wheels/sgl-kernel/*.whl "$(echo /tmp/wheels/sglang/*.whl)[srt_hip]" /tmp/wheels/torch-memory-saver/*.whl 'ray[default]==2.55.1' verl==0.9.1 \
 && cat /tmp/wheels/*/*.source > /opt/rocmkit/sources.txt
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
RUN rocmkit vf-configs --strict
# The components the base provides are still the ones its check read: no install above replaced them.
RUN python /opt/rocmkit/basecheck.py final torch torch release:2.9.1 triton triton -
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-sglang","description":"verl + SGLang rollout on ROCm 7.2 with sgl-kernel, aiter and torch_memory_saver built from source","targets":["gfx942"],"rocm":"7.2.0","python":"3.10","base_image":"rocm/pytorch:rocm7.2_ubuntu22.04_py3.10_pytorch_release_2.9.1","base_image_overridden":false,"base_pip":["setuptools==79.0.1","wheel==0.45.1","packaging==25.0","ninja==1.11.1.4","cmake==3.31.6","pybind11==2.13.6","setuptools-scm==8.3.1","psutil==7.0.0"],"base_pip_sources":[],"components":[{"name":"aiter","kind":"git","git":"https://github.com/ROCm/aiter.git","commit":"b5e03ed191fca11ee423226537ef8d9435e432a6","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sgl-kernel","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"0801cc05ed202544e2e5c67d6b0a1d454de54fca","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"sglang","kind":"git","git":"https://github.com/sgl-project/sglang.git","commit":"0801cc05ed202544e2e5c67d6b0a1d454de54fca","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":["sgl-kernel"]},{"name":"torch-memory-saver","kind":"git","git":"https://github.com/fzyzcjy/torch_memory_saver.git","commit":"f05a8754daf68238d54e4cf31cb3ba866684bbaf","tag":null,"mutable_ref":null,"mutable_reason":null,"needs":[]},{"name":"ray","kind":"pip","requirements":["ray[default]==2.55.1"],"no_deps":false},{"name":"verl","kind":"pip","requirements":["verl==0.9.1"],"no_deps":false}],"runtime_env":{"HIP_FORCE_DEV_KERNARG":"1","HSA_NO_SCRATCH_RECLAIM":"1","HSA_ENABLE_IPC_MODE_LEGACY":"1","NCCL_MIN_NCHANNELS":"112","SGLANG_USE_AITER":"1","SGLANG_SET_CPU_AFFINITY":"1","SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN":"1","TOKENIZERS_PARALLELISM":"false","RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES":"1"},"amdgpu_ids":{"file":"files/libdrm-amdgpu-ids-instinct.txt","sha256":"7a8980e70bc99777bcdb018124d4171a99cd3e8a56ad0a8fa5203cb41df30e62","entries":28},"base_provides":[{"name":"torch","distribution":"torch","version":null,"release":"2.9.1"},{"name":"triton","distribution":"triton","version":null,"mutable_reason":"no published file names the Triton of AMD'"'"'s rocm/pytorch 2.9.1 image for ROCm 7.2"}],"inputs_hash":"98407e6faf37cdc294178c734c5a948d69104ed4a5c6b3f9822c28572bae1c84"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# kernel arguments in device memory: lower launch latency (SGLang rocm.Dockerfile runtime ENV)
ENV HIP_FORCE_DEV_KERNARG="1"
# scratch memory kept, not reclaimed: vLLM Dockerfile.rocm_base says Required for RCCL in ROCm7.1; SGLang rocm.Dockerfile sets it
ENV HSA_NO_SCRATCH_RECLAIM="1"
# ROCm 7.2 switched IPC to dma-buf, which leaks exported VRAM when rollout and training share GPUs (radixark/miles Dockerfile.rocm; verl Dockerfile.rocm)
ENV HSA_ENABLE_IPC_MODE_LEGACY="1"
# RCCL channel count for MI300X/MI355X XGMI (SGLang rocm.Dockerfile runtime ENV; radixark/miles)
ENV NCCL_MIN_NCHANNELS="112"
# route SGLang kernels through the aiter built here (SGLang rocm.Dockerfile; verl platform_rocm.py defaults rollouts to 1). verl's recipe sets 0 with triton attention, but SGLang's non-aiter HIP path calls vLLM's kernels and this image has no vLLM
ENV SGLANG_USE_AITER="1"
# bind SGLang workers to the GPU NUMA node (SGLang rocm.Dockerfile runtime ENV)
ENV SGLANG_SET_CPU_AFFINITY="1"
# allow context lengths above the model config (SGLang rocm.Dockerfile runtime ENV)
ENV SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1"
# tokenizer threads and fork() in Ray workers do not mix (vLLM and verl ROCm images)
ENV TOKENIZERS_PARALLELISM="false"
# Ray 2.55.1 would narrow each actor's AMD visible devices; verl assigns GPUs itself (ray-project/ray#51104, Ray >= 2.45)
ENV RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1"
LABEL org.opencontainers.image.title="rocmkit/verl-sglang" \
    org.opencontainers.image.description="verl + SGLang rollout on ROCm 7.2 with sgl-kernel, aiter and torch_memory_saver built from source" \
    org.opencontainers.image.version="rocm7.2.0-gfx942-98407e6faf37" \
    org.opencontainers.image.base.name="rocm/pytorch:rocm7.2_ubuntu22.04_py3.10_pytorch_release_2.9.1" \
    io.rocmkit.stack="verl-sglang" \
    io.rocmkit.targets="gfx942" \
    io.rocmkit.rocm="7.2.0" \
    io.rocmkit.python="3.10" \
    io.rocmkit.inputs-hash="98407e6faf37cdc294178c734c5a948d69104ed4a5c6b3f9822c28572bae1c84" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.55.1" \
    io.rocmkit.base-provides="torch=2.9.1.*,triton=MUTABLE" \
    io.rocmkit.mutable-components="triton"
