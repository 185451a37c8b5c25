#!/usr/bin/env bash
# install.sh — on the GPU host, with the last part sent (the others stashed by stash.sh): install the SGLang wheels
# into /tmp/site-sg once. Use it ahead of gpu-verl's /tmp/site: PYTHONPATH=/tmp/site-sg:/tmp/site:$PWD.
S=/var/tmp/stash-sg; SITE=/tmp/site-sg; W=/var/tmp/wheels-sg
[ -f "$SITE/.done" ] && exit 0
last=$(ls -d .stash-sg/[0-9] 2>/dev/null | tail -n 1); [ -n "$last" ] && cp "$last"/p* "$S/"
n=$(wc -l < .stash-sg/bin/SHA256SUMS)
for ((i = 0; i < n; i++)); do [ -f "$S/p$i" ] || { echo "STASH-LOST: p$i; start again at part 0"; exit 3; }; done
(cd "$S" && sha256sum -c --quiet -) < .stash-sg/bin/SHA256SUMS || exit 4
t0=$SECONDS; mkdir -p "$W"
cat $(for ((i = 0; i < n; i++)); do echo "$S/p$i"; done) | tar -xf - -C "$W" || exit 5
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$W"/*.whl || exit 6
touch "$SITE/.done"; echo "SGLang install: $((SECONDS - t0)) s"
