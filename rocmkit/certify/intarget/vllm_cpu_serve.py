"""`trl vllm-serve` for vLLM's CPU build: `python -m rocmkit.certify.intarget.vllm_cpu_serve [trl vllm-serve arguments]`.

`trl vllm-serve` builds a `vllm serve` command line with TRL's settings and execs vLLM's CLI, which asks
importlib.metadata for the distribution named "vllm" (vllm/entrypoints/cli/main.py); vllm-cpu installs as
"vllm-cpu", so the CLI fails before it parses anything. This runs TRL's own parser and command builder
unchanged, and execs the same server through vLLM's api_server module, which takes the same arguments
with the model as --model and does not ask. On GPU stacks `trl vllm-serve` runs as it is.
"""

from __future__ import annotations

import os
import sys

CLI = ["-m", "vllm.entrypoints.cli.main", "serve"]


def api_server_command(command: list[str]) -> list[str]:
    """TRL's `python -m vllm.entrypoints.cli.main serve MODEL ...` as `python -m ...api_server --model MODEL ...`."""
    at = next(i for i in range(len(command)) if command[i:i + 3] == CLI)
    model = command[at + 3]
    return command[:at] + ["-m", "vllm.entrypoints.openai.api_server", "--model", model] + command[at + 4:]


def main() -> None:
    from trl.scripts.vllm_serve import build_command, make_parser

    script_args, extra = make_parser(prog="trl vllm-serve").parse_args_and_config(return_remaining_strings=True)
    command = api_server_command(build_command(script_args, extra))
    print("rocmkit: " + " ".join(command), flush=True)
    # the weight-transfer and prefix-cache endpoints (and /collective_rpc) live behind vLLM's dev mode, as TRL sets
    os.execve(command[0], command, {**os.environ, "VLLM_SERVER_DEV_MODE": "1"})


if __name__ == "__main__":
    sys.exit(main())
