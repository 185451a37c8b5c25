#!/usr/bin/env bash
# The certify tests: TRL on the CPU (torch 2.13.0 CPU build, which pip takes from this machine's disk) and
# verl 0.9.1 for the offline configuration check. verl is installed without its heavy optional runtime
# (wandb, tensorboard, ray[default] extras): the check needs only what `import verl` and its config code
# import, listed here with exact versions. Idempotent: pip skips what is already installed.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
pip="$work/venv/bin/python -m pip"
$pip install -q torch==2.13.0
$pip install -q -e '.[certify]' transformers==5.10.4 trl==1.16.0 datasets==5.2.0 accelerate==1.15.0 \
  peft==0.21.2 pyarrow==26.0.1 pillow==12.0.0
$pip install -q --no-deps verl==0.9.1
$pip install -q hydra-core==1.3.2 omegaconf==2.3.0 tensordict==0.10.0 codetiming==1.4.0 pylatexenc==2.10 \
  torchdata==0.11.0 dill==0.4.1 ray==2.60.0
# Certify's packages are provisioned: their tests must run, not skip.
echo "export ROCMKIT_REQUIRE_CERTIFY=1" >> "$work/env"
# SGLang 0.5.12's wheel (verl 0.9.1's [sglang] pin, 7.8 MB), not installed: verl-check's SGLang rules are compared
# with the backends its own server_args.py lists per platform (tests/test_verl_rollout_rules.py)
$pip download -q --no-deps sglang==0.5.12 -d "$work/upstream"
echo "export ROCMKIT_SGLANG_WHEEL=$(ls "$work"/upstream/sglang-0.5.12-*.whl)" >> "$work/env"
