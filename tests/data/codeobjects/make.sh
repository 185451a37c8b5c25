#!/usr/bin/env bash
# Regenerates the shared objects of this directory with Debian sid's hipcc (no GPU needed: the compiler only
# writes code objects). Usage, as root:  tests/data/codeobjects/make.sh [SID_ROOT]
# SID_ROOT (default /tmp/sid) is made when missing:
#   debootstrap --variant=minbase sid SID_ROOT http://deb.debian.org/debian
#   chroot SID_ROOT apt-get -o Acquire::Check-Valid-Until=false update
#   chroot SID_ROOT apt-get -o Acquire::Check-Valid-Until=false install -y --no-install-recommends hipcc libamdhip64-dev
# Not run by CI (the sid root and its compiler are ~1 GB); the outputs are committed. hipcc writes
# nondeterministic bytes (bundle ids, hashes), so a rebuild differs byte for byte but not in what the audit reads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-/tmp/sid}
if [[ ! -x "$root/usr/bin/hipcc" ]]; then
  [[ -d "$root/usr" ]] || debootstrap --variant=minbase sid "$root" http://deb.debian.org/debian
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" apt-get -o Acquire::Check-Valid-Until=false update
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -o Acquire::Check-Valid-Until=false install -y \
    --no-install-recommends hipcc libamdhip64-dev
fi
# hipcc finds its own path through /proc/self/exe
mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc"; trap 'umount "$root/proc"' EXIT; }
work=$(mktemp -d "$root/tmp/codeobjects.XXXXXX")
cp "$here/kernel.hip" "$work/"
w=/tmp/$(basename "$work")
# -O2 and no debug info: small files; -fPIC -shared: a library, as the audit scans libraries.
chroot "$root" bash -euc "
  cd $w
  hipcc --version > hipcc-version.txt 2>&1
  flags='-O2 -fPIC -shared'
  hipcc \$flags --offload-arch=gfx942 --offload-arch=gfx950 kernel.hip -o libfat-gfx942-gfx950.so
  hipcc \$flags --offload-arch=gfx950 kernel.hip -o libonly-gfx950.so
  hipcc \$flags --offload-arch=gfx942 --offload-arch=gfx950 --offload-compress kernel.hip -o libcompressed-gfx942-gfx950.so
  # the compressed bundle's header version 3 (u64 sizes): clang writes 2 unless this variable says otherwise
  COMPRESSED_BUNDLE_FORMAT_VERSION=3 hipcc \$flags --offload-arch=gfx942 --offload-arch=gfx950 --offload-compress \
    kernel.hip -o libcompressed-v3-gfx942-gfx950.so
  hipcc \$flags --offload-arch=gfx9-4-generic kernel.hip -o libgeneric-gfx9-4.so
"
cp "$work"/*.so "$work/hipcc-version.txt" "$here/"
rm -rf "$work"
(cd "$here" && sha256sum ./*.so | sed "s|  ./|  |" > SHA256SUMS)
ls -l "$here"/*.so
