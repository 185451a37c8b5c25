#!/usr/bin/env bash
# faults.sh KIND NAME GPUS [DELAY_S] — on the GPU host, after install.sh: certify verl with SGLang on GPUS (e.g. 0,1:
# one replica at TP 2; 0: TP 1) and, DELAY_S (default 15) after verl's "ready to fit", hurt SGLang's last scheduler
# (sglang::scheduler_TP1 at TP 2; plain sglang::scheduler at TP 1, where SGLang names no rank) from outside:
#   kill    SIGKILL (the crash the certificate must name, by pid)
#   freeze  the cgroup v2 freezer (the stall the stall report must name)
# Writes /var/tmp/NAME (the certify folder), NAME.log and NAME.act (what was done to which pid, when). Several may
# run side by side on disjoint GPUs: each gets its own HOME, since SGLang and flashinfer compile kernels into
# ~/.cache at the first start and a second run waits on the first one's lock.
# --timeout 560: SGLang's start-up took 330 s on two H200s, then the stall timeout (60 s) and the report.
set -u
kind=$1 name=$2 gpus=$3 delay=${4:-15}
n=$(echo "$gpus" | tr "," "\n" | wc -l); victim=sglang::scheduler_TP$((n - 1)); [ "$n" -gt 1 ] || victim=sglang::scheduler
here=$(cd "$(dirname "$0")/../.." && pwd)
out=/var/tmp/$name
mkdir -p "/var/tmp/home-$name"
( cd "$here" && HOME=/var/tmp/home-$name CUDA_VISIBLE_DEVICES=$gpus PYTHONPATH=/tmp/site-sg:/tmp/site:$here \
    exec python3 -m rocmkit certify --host --engine verl --rollout sglang --gpus $n --rollout-tp $n \
    --stall-timeout 60 --no-probes --timeout 560 --progress plain --out "$out" > "$out.log" 2>&1 ) &
root=$!
t0=$SECONDS
until grep -qs "ready to fit" "$out/run.log"; do
  kill -0 "$root" 2>/dev/null || { echo "certify ended before the run was ready" >> "$out.act"; wait "$root"; exit; }
  [ $((SECONDS - t0)) -lt 500 ] || { echo "not ready after 500 s" >> "$out.act"; wait "$root"; exit; }
  sleep 1
done
sleep "$delay"
pid=$(python3 - "$root" "$victim" <<'PY'
import os, sys
root, victim = int(sys.argv[1]), sys.argv[2]
def parent(p):
    try:
        return int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0].decode()
    except OSError:
        continue
    q = int(p)
    while cmd.startswith(victim) and q > 1:
        if q == root:
            print(p)
            sys.exit(0)
        q = parent(q)
PY
)
echo "$(date +%T) $kind $victim pid=$pid (certify pid $root)" >> "$out.act"
case $kind in
kill) kill -9 "$pid" ;;
freeze) g=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup")/rocmkit-freeze-$pid
        mkdir -p "$g" && echo "$pid" > "$g/cgroup.procs" && echo 1 > "$g/cgroup.freeze" && cat "$g/cgroup.events" >> "$out.act" ;;
esac
wait "$root"; echo "certify exit $?" >> "$out.act"
