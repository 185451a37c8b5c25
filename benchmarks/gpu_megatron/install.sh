#!/usr/bin/env bash
# install.sh [start|wait] — on the GPU host, after the five parts are stashed (needs .stash-mc/small and /bin sent):
#   start  installs TransformerEngine's core, its Python package, megatron-core, mbridge, cudnn-frontend and
#          nvdlfw-inspect into /tmp/site-mc, then starts building transformer-engine-torch (PyPI has only its sdist;
#          a C++ extension compiled with g++ against torch's and CUDA's headers, for sm_90) in the background
#          under setsid; its log is /tmp/site-mc/te-build.log. Returns at once.
#   wait   waits (at most WAIT_S, default 900 s) for that build; exit 0 when transformer_engine.pytorch imports.
# (pip --target skips the extension's files when transformer_engine/ exists, so they are copied in.)
# Use /tmp/site-mc ahead of gpu-verl's /tmp/site: PYTHONPATH=/tmp/site-mc:/tmp/site:$PWD.
S=/var/tmp/stash-mc; SITE=/tmp/site-mc; W=/var/tmp/wheels-mc
case "${1:-start}" in
start)
  n=$(wc -l < .stash-mc/bin/SHA256SUMS)
  for ((i = 0; i < n; i++)); do [ -f "$S/p$i" ] || { echo "STASH-LOST: p$i; start again at part 0"; exit 3; }; done
  (cd "$S" && sha256sum -c --quiet -) < .stash-mc/bin/SHA256SUMS || exit 4
  mkdir -p "$W" "$SITE"; cat $(for ((i = 0; i < n; i++)); do echo "$S/p$i"; done) > "$W/$(cat .stash-mc/bin/NAME)"
  cp .stash-mc/small/* "$W/"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$W"/*.whl || exit 6
  echo "installed: $(ls "$W" | tr '\n' ' ')"
  # the build sees torch (the host's), gpu-verl's /tmp/site (pydantic and the rest) and the packages above
  (cd "$W" && rm -rf te-src && mkdir te-src && tar -xzf transformer_engine_torch-*.tar.gz -C te-src --strip-components=1)
  setsid bash -c "cd $W/te-src && export PYTHONPATH=$SITE:/tmp/site NVTE_PYTORCH_FORCE_BUILD=TRUE NVTE_CUDA_ARCHS=90 \
      NVTE_WITH_NCCL_EP=0 MAX_JOBS=\$(nproc) && t0=\$SECONDS && \
      python3 -m pip wheel -v --no-build-isolation --no-deps --no-index -w $W/built . && \
      python3 -m zipfile -e $W/built/transformer_engine_torch-*.whl $W/te-ext && cp -rn $W/te-ext/. $SITE/ && \
      echo BUILT in \$((SECONDS - t0)) s" > "$SITE/te-build.log" 2>&1 < /dev/null &
  echo "building transformer-engine-torch in the background: $SITE/te-build.log" ;;
wait)
  t0=$SECONDS; limit=${WAIT_S:-900}
  until grep -q "^BUILT" "$SITE/te-build.log" 2>/dev/null; do
    if ! pgrep -f "pip wheel -v --no-build-isolation" >/dev/null; then echo "the build stopped:"; tail -30 "$SITE/te-build.log"; exit 7; fi
    [ $((SECONDS - t0)) -lt "$limit" ] || { echo "still building after $limit s:"; tail -5 "$SITE/te-build.log"; exit 124; }
    sleep 5
  done
  grep "^BUILT" "$SITE/te-build.log"
  PYTHONPATH=$SITE:/tmp/site python3 -c "import transformer_engine.pytorch as te, transformer_engine; print('transformer_engine', transformer_engine.__version__, 'imports')" ;;
esac
