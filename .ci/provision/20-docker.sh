#!/usr/bin/env bash
# Docker engine for the `docker` tests: Debian's docker.io (its /usr/bin/docker 20.10 client builds with
# the engine's built-in BuildKit when DOCKER_BUILDKIT=1), a dockerd started as root, and a local base
# image made with debootstrap, since no registry is reachable. Idempotent: each part is skipped when
# it is already there.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
mkdir -p "$work"

# What the test stack's build needs offline inside the image: Python with venv/pip/setuptools/wheel, a C
# compiler and headers for the components that compile, and rocmkit's runtime dependencies as Debian
# packages (the image's venv sees them through --system-site-packages, so `pip install rocmkit.whl`
# finds them satisfied without a network).
base_packages="python3,python3-venv,python3-pip,python3-setuptools,python3-wheel,python3-dev,gcc,libc6-dev,\
python3-click,python3-jinja2,python3-packaging,python3-psutil,python3-docker,python3-rich,libnuma1"
# The image name carries a hash of the package list, so changing the list builds a new image.
base_image="rocmkit-test/bookworm-python:$(printf '%s' "$base_packages" | sha256sum | cut -c1-12)"

# tmux: the build display's test draws it on a real terminal and reads the screen back. zstd: the code-object
# audit reads clang's zstd-compressed bundles through it (tests/test_codeobjects_hipcc.py).
if ! [ -x /usr/bin/docker ] || ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null \
   || ! command -v docker-registry >/dev/null || ! command -v tmux >/dev/null || ! command -v zstd >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io debootstrap ca-certificates \
    docker-registry tmux zstd
fi

engine_up() { /usr/bin/docker version >/dev/null 2>&1; }
if ! engine_up; then
  # No bridge and no iptables: the builds run with --network none, and this host may not allow either.
  setsid nohup dockerd --iptables=false --ip6tables=false --bridge=none >"$work/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
  if ! engine_up; then
    echo "dockerd did not come up within 60s; its log ($work/dockerd.log) ends:" >&2
    tail -n 30 "$work/dockerd.log" >&2
    exit 1
  fi
fi
/usr/bin/docker version --format 'docker engine {{.Server.Version}}, client {{.Client.Version}}'

if ! /usr/bin/docker image inspect "$base_image" >/dev/null 2>&1; then
  root="$work/debootstrap-root"
  rm -rf "$root"
  debootstrap --variant=minbase --include="$base_packages" bookworm "$root" http://deb.debian.org/debian \
    > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | /usr/bin/docker import --change 'CMD ["/bin/bash"]' - "$base_image"
  rm -rf "$root"
fi

# A local registry (Debian's docker-registry, distribution 2.8) for the --push tests: no registry outside
# is reachable. The engine treats 127.0.0.0/8 as an insecure (plain HTTP) registry by default.
registry_addr=127.0.0.1:5555
registry_up() { python3 -c "import urllib.request; urllib.request.urlopen('http://$registry_addr/v2/', timeout=2)" 2>/dev/null; }
if ! registry_up; then
  mkdir -p "$work/registry"
  printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n' \
    "$work/registry" "$registry_addr" > "$work/registry.yml"
  setsid nohup docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 < /dev/null &
  for _ in $(seq 1 30); do
    registry_up && break
    sleep 1
  done
  registry_up || { echo "docker-registry did not come up; its log ends:" >&2; tail -n 20 "$work/registry.log" >&2; exit 1; }
fi

{
  echo "export ROCMKIT_TEST_REGISTRY=localhost:5555"
  echo "export ROCMKIT_TEST_BASE_IMAGE=$base_image"
  # The engine is provisioned: the docker tests must run, not skip.
  echo "export ROCMKIT_REQUIRE_DOCKER=1"
  # The docker client first on PATH may be one without BuildKit (as on the project's machines); name
  # the one that has it, so rocmkit and the tests do not depend on PATH order.
  echo "export ROCMKIT_DOCKER=/usr/bin/docker"
} >> "$work/env"
