#!/bin/bash
# rocmkit verl-check's stand-in for a command that would touch the world (python, ray, torchrun, downloads,
# GPU tools, file changes) while a launch script runs in its sandbox (rocmkit/verl/script_sandbox.py).
# One file, linked under each name; what it does depends on the name it was called by. Every call is
# recorded (name, the script's line, the working directory, the arguments) for rocmkit to read afterwards;
# a runner's call (python, torchrun) also leaves the variables exported to it, in a file of the same name and
# .env, written first. It runs no real python, touches no file outside its record directory, and answers GPU
# queries with ROCMKIT_SANDBOX_GPUS. It uses bash builtins only (and `cat` for tee), so the other stand-ins
# never run it.
set +xeu
name=${0##*/}
gpus=${ROCMKIT_SANDBOX_GPUS:-8}
record() {
    local dir=${ROCMKIT_SANDBOX_RECORDS:-} at var
    [[ -n $dir && -d $dir ]] || return 0
    at=$dir/$EPOCHREALTIME.$$.$RANDOM
    case $name in
    python* | torchrun)
        for var in $(compgen -e); do printf '%s=%s\0' "$var" "${!var}"; done >"$at.env" ;;
    esac
    printf '%s\0' "$name" "${ROCMKIT_LINE:-0}" "${ROCMKIT_SOURCE:-}" "$PWD" "$@" >"$at"
}
record "$@"

# list2cmdline: how Ray joins `ray job submit -- ARGS` into the one shell command its job runs
# (ray/dashboard/modules/job/cli.py uses subprocess.list2cmdline; the job supervisor runs it with a shell).
list2cmdline() {
    local out="" arg quoted bs c i
    for arg in "$@"; do
        [[ -n $out ]] && out+=" "
        quoted=""
        bs=""
        for ((i = 0; i < ${#arg}; i++)); do
            c=${arg:i:1}
            if [[ $c == '\' ]]; then
                bs+='\'
            elif [[ $c == '"' ]]; then
                quoted+="$bs$bs"'\"'
                bs=""
            else
                quoted+="$bs$c"
                bs=""
            fi
        done
        if [[ -z $arg || $arg == *[$' \t']* ]]; then
            out+="\"$quoted$bs$bs\""
        else
            out+="$quoted$bs"
        fi
    done
    printf '%s' "$out"
}

case $name in
python | python[0-9] | python[0-9].[0-9] | python[0-9].[0-9][0-9])
    # A GPU query (`python3 -c "import torch; print(torch.cuda.device_count())"`) answers --gpus; any other
    # python (main_ppo, data preparation, downloads) only leaves its record.
    code=""
    while (($#)); do
        case $1 in
        -c) code=${2:-}; break ;;
        -c*) code=${1#-c}; break ;;
        -m | -*m) break ;;
        -W | -X) shift 2 ;;
        -*) shift ;;
        *) break ;;
        esac
    done
    # Another vendor's accelerator library (verl's examples pick their device with
    # `python3 -c 'import torch_npu'`): not on a GPU host, so the probe fails as it would there.
    for m in torch_npu torch_mlu torch_musa habana_frameworks; do
        re="(^|[^[:alnum:]_.])(import|from)[[:space:]]+$m([^[:alnum:]_]|$)"
        if [[ $code =~ $re ]]; then
            echo "ModuleNotFoundError: No module named '$m'" >&2
            exit 1
        fi
    done
    if [[ $code == *device_count* ]]; then
        echo "$gpus"
    elif [[ $code == *is_available* ]]; then
        echo True
    fi
    exit 0
    ;;
ray)
    if [[ ${1:-} == job && ${2:-} == submit ]]; then
        shift 2
        while (($#)) && [[ $1 != -- ]]; do shift; done
        (($#)) && shift
        (($#)) || exit 0
        exec /bin/sh -c "$(list2cmdline "$@")"
    fi
    exit 0 ;;  # ray start, stop, status ...: no cluster here, and none needed
srun)
    # srun [options] COMMAND ARGS: the command runs as srun would run it on one node.
    while (($#)); do
        case $1 in
        -w | -N | -n | -c | -p | -t | -J | -o | -e | -A | -q | -G | --nodelist | --nodes | --ntasks | --partition | --time | --job-name | --account | --gres | --gpus | --cpus-per-task | --mem | --export | --container-image | --container-mounts)
            shift 2 ;;
        -*) shift ;;
        *) break ;;
        esac
    done
    (($#)) || exit 0
    exec "$@" ;;
nvidia-smi)
    query="" header=1
    for a in "$@"; do
        case $a in
        --query-gpu=*) query=${a#--query-gpu=} ;;
        --format=*noheader*) header=0 ;;
        esac
    done
    if [[ -n $query ]]; then
        ((header)) && echo "$query"
        for ((i = 0; i < gpus; i++)); do
            fields=()
            IFS=, read -ra names <<<"$query"
            for f in "${names[@]}"; do
                case $f in
                index) fields+=("$i") ;;
                count) fields+=("$gpus") ;;
                uuid | gpu_uuid) fields+=("GPU-rocmkit-sandbox-$i") ;;
                name | gpu_name) fields+=("rocmkit sandbox GPU") ;;
                *) fields+=("0") ;;
                esac
            done
            (IFS=,; echo "${fields[*]}")
        done
    else
        for ((i = 0; i < gpus; i++)); do echo "GPU $i: rocmkit sandbox GPU (UUID: GPU-rocmkit-sandbox-$i)"; done
    fi
    exit 0 ;;
rocm-smi)
    for ((i = 0; i < gpus; i++)); do echo "GPU[$i]		: Card series: 		rocmkit sandbox GPU"; done
    exit 0 ;;
amd-smi)
    for ((i = 0; i < gpus; i++)); do printf 'GPU: %d\n    BDF: 0000:%02x:00.0\n    UUID: rocmkit-sandbox-%d\n\n' "$i" "$i" "$i"; done
    exit 0 ;;
tee)
    exec cat ;;  # passes its input on; writes no file
*)
    exit 0 ;;  # sleep returns at once; downloads, installs and file changes do nothing and succeed
esac
