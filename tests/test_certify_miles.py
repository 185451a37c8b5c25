"""`certify --engine miles`: the exact argv and environment that run Miles' short e2e test, against what
that test file and Miles' command_utils expect at the pinned commit (tests/data/miles-e2e-short-test.json,
copied by hand from them); the certificate read from a `ray job submit` output; the CLI's refusals.
The test itself needs 4 AMD GPUs and the Hugging Face Hub: it does not run here (docs/guides/certification.md and docs/verified.md say so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.certify.engines.miles import engine as miles_run
from rocmkit.errors import UsageError

EXPECT = json.loads((Path(__file__).parent / "data" / "miles-e2e-short-test.json").read_text())


def miles_bool(env: dict[str, str], name: str, default: str) -> bool:
    """Miles' get_bool_env_var, as the saved copy states it: lower-cased value in the truthy list."""
    return env.get(name, default).lower() in EXPECT["bool_truthy"]


@pytest.mark.parametrize("gpus", [4, 8])
def test_argv_and_env_give_the_test_its_gpu_count(gpus):
    argv, env = miles_run.command(gpus)
    assert argv == ["python3", f"/root/miles/{EXPECT['test_file']}"]
    assert miles_run.MILES_COMMIT == EXPECT["source"]["commit"]
    few = miles_bool(env, EXPECT["few_gpu_variable"], EXPECT["few_gpu_default"])
    assert (EXPECT["num_gpus"]["few"] if few else EXPECT["num_gpus"]["full"]) == gpus
    assert env == {"MILES_TEST_FEW_GPU": "1" if gpus == 4 else "0", "PYTHONPATH": "/root/miles",
                   "PYTHONUNBUFFERED": "1"}


def test_pythonpath_makes_the_tests_package_and_the_checkouts_miles_importable():
    argv, env = miles_run.command(4, "/opt/miles")
    root = env["PYTHONPATH"]
    # `tests.ci.ci_register` and `miles.utils...` both resolve under the checkout (command_utils finds
    # train.py three folders above itself, so miles must come from the checkout, not a wheel).
    assert env["PYTHONPATH"].split(":") == ["/opt/miles"]
    for module in EXPECT["imports"]:  # each top-level package is a folder of the checkout on the path
        assert module.split(".")[0] in ("tests", "miles")
    assert argv[1] == f"{root}/{EXPECT['test_file']}" and EXPECT["test_file"].startswith("tests/")


def test_docker_run_is_root_in_the_checkout_with_the_gpus():
    argv = miles_run.docker_argv("img@sha256:" + "0" * 64, 4, "/root/miles", [("/tmp/out", "/tmp/out", "rw")])
    assert not any(a.startswith("--user") for a in argv)  # the test writes /root/models and /root/datasets
    assert "--workdir=/root/miles" in argv
    i = argv.index("img@sha256:" + "0" * 64)
    assert argv[i + 1:] == ["python3", f"/root/miles/{EXPECT['test_file']}"]
    pairs = {argv[j + 1] for j, a in enumerate(argv[:i]) if a == "-e"}
    assert {"MILES_TEST_FEW_GPU=1", "PYTHONPATH=/root/miles"} <= pairs
    assert "-v" in argv and "/tmp/out:/tmp/out:rw" in argv


@pytest.mark.parametrize("gpus", [0, 1, 2, 3, 5, 16])
def test_other_gpu_counts_are_refused(gpus):
    with pytest.raises(UsageError) as e:
        miles_run.command(gpus)
    assert "4" in e.value.message and "8" in e.value.message


@pytest.mark.parametrize("path", ["relative/miles", "/root/../etc", "/root/mi les", "/root/$(id)"])
def test_bad_miles_dir_is_refused(path):
    with pytest.raises(UsageError):
        miles_run.command(4, path)


def test_certificate_checks_from_the_ray_job_output():
    ok = ["Job 'raysubmit_abc' submitted successfully", "...", "Job 'raysubmit_abc' succeeded"]
    checks = miles_run.checks_from_output(0, False, ok)
    assert [c["passed"] for c in checks] == [True, True]
    failed = ["Job 'raysubmit_abc' failed", "RuntimeError: ci-test check failed"]
    checks = miles_run.checks_from_output(1, False, failed)
    assert [c["passed"] for c in checks] == [False, False]
    assert checks[0]["detail"] == "exit code 1" and "failed" in checks[1]["detail"]
    checks = miles_run.checks_from_output(None, True, [])
    assert checks[0]["detail"] == "still running at the deadline"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "rocmkit", "certify", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ})


def test_cli_refuses_miles_without_an_image(tmp_path):
    r = _cli("--engine", "miles", "--gpus", "4", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "give --image" in r.stderr and "Traceback" not in r.stderr


def test_cli_refuses_miles_on_one_gpu(tmp_path):
    r = _cli("--engine", "miles", "--gpus", "1", "--image", "x/y:z", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "4 GPUs" in r.stderr and "Traceback" not in r.stderr
