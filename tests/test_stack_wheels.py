"""ROCm from pip wheels, wheel components and the image's constraint file: the example stack in
tests/data/stacks/pip-rocm.toml rendered per arch, every field's validation, and what the manifest, SBOM,
lock, outdated and the wheelhouse make of them. The real build is tests/test_stack_wheels_docker.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocmkit.errors import InputFileError
from rocmkit.image.constraints import stack_pins
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile
from rocmkit.image.wheelhouse import pip_calls
from rocmkit.stacks import ComponentKind, load_file

EXAMPLE = Path(__file__).parent / "data" / "stacks" / "pip-rocm.toml"
SHA = "ab" * 32


def rendered(arch: str) -> tuple[str, dict]:
    plan = make_plan(load_file(EXAMPLE), [arch])
    return render_dockerfile(plan), plan.manifest


@pytest.mark.parametrize("arch,family,other", [("gfx942", "gfx94X-dcgpu", "gfx950-dcgpu"),
                                               ("gfx950", "gfx950-dcgpu", "gfx94X-dcgpu")])
def test_example_renders_the_device_payload_of_its_arch_only(arch, family, other):
    text, manifest = rendered(arch)
    install = next(line for line in text.splitlines() if "'rocm[libraries,devel]==7.14.0'" in line)
    assert f"rocm-sdk-device-{family}==7.14.0" in install
    assert other not in text
    assert manifest["base_rocm_wheels"]["requirements"] == ["rocm[libraries,devel]==7.14.0",
                                                           f"rocm-sdk-device-{family}==7.14.0"]
    # The constraint file holds the ROCm wheels (no extras), torch, the marked wheel and the listed pin.
    assert manifest["constraints"] == {"path": "/opt/rocmkit/constraints.txt", "pins": [
        "rocm==7.14.0", f"rocm-sdk-device-{family}==7.14.0", "torch==2.12.0+rocm7.14.0",
        "amd-aiter==0.1.19.post3+rocm7.14.0", "pybind11==2.13.6"]}
    assert (f"printf '%s\\n' rocm==7.14.0 rocm-sdk-device-{family}==7.14.0 torch==2.12.0+rocm7.14.0 "
            "amd-aiter==0.1.19.post3+rocm7.14.0 pybind11==2.13.6 > /opt/rocmkit/constraints.txt") in text
    assert "grep -iE '^(torchvision|torchaudio)==' || true; } >> /opt/rocmkit/constraints.txt" in text


def test_rocm_from_wheels_sets_rocm_path_from_the_sdk_before_anything_uses_it():
    text, _ = rendered("gfx942")
    order = [text.index(s) for s in ("-m venv", "RUN python -m rocm_sdk init", 'ln -s "$root" /opt/rocm',
                                     "ENV ROCM_PATH=/opt/rocm", "ENV PATH=/opt/rocm/bin:/opt/rocm/lib/llvm/bin:$PATH",
                                     "ln -sf /opt/rocm/lib/libamdhip64.so", "ENV PIP_CONSTRAINT=", "FROM base AS final")]
    assert order == sorted(order)
    assert text.count("libamdhip64.so /usr/lib") == 1


def test_wheel_components_install_in_the_final_resolution_verified():
    text, manifest = rendered("gfx942")
    final = text[text.index("FROM base AS final"):]
    run = final[:final.index("# rocmkit itself")]
    assert "--mount=type=bind,source=assets,target=/tmp/rocmkit-assets" in run
    wheel = "/tmp/rocmkit-assets/amd_aiter-0.1.19.post3+rocm7.14.0-cp312-cp312-linux_x86_64.whl"
    check = run.index(f'[ "$(sha256sum {wheel})" = "{"0" * 63}1  {wheel}" ]')
    install = run.index("pip install --extra-index-url https://rocm.example.invalid/simple "
                        "/tmp/rocmkit-assets/amd_aiter-0.1.19.post3+rocm7.14.0-cp312-cp312-linux_x86_64.whl "
                        "--only-binary mori mori==1.1.0 'ray[default]==2.53.0'")
    assert check < install
    assert "component aiter: wheel https://rocm.example.invalid/whl/amd_aiter" in run
    aiter, ray, mori = manifest["components"]
    assert aiter == {"name": "aiter", "kind": "wheel", "requirement": "amd-aiter==0.1.19.post3+rocm7.14.0",
                     "url": "https://rocm.example.invalid/whl/amd_aiter-0.1.19.post3%2Brocm7.14.0-cp312-cp312-"
                            "linux_x86_64.whl", "sha256": "0" * 63 + "1", "constrain": True}
    assert mori == {"name": "mori", "kind": "wheel", "requirement": "mori==1.1.0",
                    "extra_index_url": "https://rocm.example.invalid/simple"}


def test_a_stack_without_the_new_fields_keeps_the_image_side_constraint_only(tmp_path):
    stack = load_file(_write(tmp_path, components=_GIT))
    assert stack_pins(stack, ["gfx942"]) == []
    text = render_dockerfile(make_plan(stack, ["gfx942"]))
    assert "printf '%s\\n'" not in text.split("ENV PIP_CONSTRAINT")[0].split("# Hold the PyTorch")[1]
    assert "constraints" not in make_plan(stack, ["gfx942"]).manifest


# ---- validation: a clear error naming the file and the field ----

_GIT = """
[[component]]
name = "greet"
git = "https://example.invalid/greet.git"
commit = "{commit}"
""".format(commit="a" * 40)


def _write(tmp_path: Path, *, components: str = "", base_extra: str = "", top: str = "", rocm: str = "7.14.0") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent(f"""\
        schema = "rocmkit.stack/v1"
        name = "wheeltest"
        description = "wheel fields"
        targets = ["gfx942", "gfx950"]
        rocm = "{rocm}"
        python = "3.12"
        {top}
        [base]
        image = "ubuntu:22.04"
        """) + base_extra + components)
    return path


def _wheel(spec: str, extra: str = "") -> str:
    return f'\n[[component]]\nname = "pre"\nwheel = {spec}\n{extra}\n'


_URL = "https://files.example.invalid/w/pre-1.0-py3-none-any.whl"


@pytest.mark.parametrize("spec,extra,field,problem", [
    (f'{{ url = "{_URL}", sha256 = "abc" }}', "", "component[0] (pre).wheel.sha256", "invalid value 'abc'"),
    (f'{{ url = "{_URL}", sha256 = "{SHA.upper()}" }}', "", "component[0] (pre).wheel.sha256", "invalid value"),
    (f'{{ url = "{_URL}" }}', "", "component[0] (pre).wheel.sha256", "missing required field"),
    (f'{{ url = "http://files.example.invalid/pre-1.0-py3-none-any.whl", sha256 = "{SHA}" }}', "",
     "component[0] (pre).wheel.url", "invalid value"),
    (f'{{ url = "ftp://h/pre-1.0-py3-none-any.whl", sha256 = "{SHA}" }}', "", "component[0] (pre).wheel.url",
     "invalid value"),
    (f'{{ url = "https://h.invalid/pre.whl", sha256 = "{SHA}" }}', "", "component[0] (pre).wheel.url",
     "not a wheel's file name"),
    (f'{{ url = "{_URL}", sha256 = "{SHA}", pin = "pre==1.0" }}', "", "component[0] (pre).wheel.url",
     "either url"),
    ("{ }", "", "component[0] (pre).wheel.url", "either url"),
    ('{ pin = "pre>=1.0" }', "", "component[0] (pre).wheel.pin[0]", "not pinned to one exact version"),
    (f'{{ pin = "pre==1.0", sha256 = "{SHA}" }}', "", "component[0] (pre).wheel.sha256", "belongs to a url"),
    (f'{{ url = "{_URL}", sha256 = "{SHA}" }}', 'git = "https://example.invalid/x.git"', "component[0] (pre).git",
     "exactly one of git, pip or wheel"),
    (f'{{ url = "{_URL}", sha256 = "{SHA}" }}', 'pip = ["pre==1.0"]', "component[0] (pre).pip",
     "exactly one of git, pip or wheel"),
])
def test_wheel_fields_are_checked(tmp_path, spec, extra, field, problem):
    with pytest.raises(InputFileError) as e:
        load_file(_write(tmp_path, components=_wheel(spec, extra)))
    assert e.value.field == field and problem in e.value.message and str(tmp_path / "s.toml") in e.value.message


def test_file_url_is_accepted_and_its_pin_read_from_the_file_name(tmp_path):
    stack = load_file(_write(tmp_path, components=_wheel(f'{{ url = "file:///srv/w/pre-1.0-py3-none-any.whl", '
                                                         f'sha256 = "{SHA}" }}', "constrain = true")))
    (c,) = stack.components
    assert c.kind is ComponentKind.WHEEL and c.wheel_pin() == "pre==1.0" and c.constrain
    assert stack_pins(stack, ["gfx942"]) == ["pre==1.0"]


@pytest.mark.parametrize("table,field,problem", [
    ('packages = []', "base.rocm_wheels.packages", "at least one"),
    ('packages = ["rocm[libraries]==7.13.0"]', "base.rocm_wheels.packages[0]", "pins rocm 7.13.0"),
    ('packages = ["rocm==7.14.0"]\ndevice = ["rocm-sdk-device==7.14.0"]', "base.rocm_wheels.device[0]",
     "does not name the arch"),
    ('packages = ["rocm==7.14.0"]\ndevice = ["rocm-sdk-device-{arch}>=7.14.0"]',
     "base.rocm_wheels (gfx942).device[0]", "not pinned"),
    ('packages = ["rocm==7.14.0"]\narch_names = { gfx90a = "x" }', "base.rocm_wheels.arch_names.gfx90a",
     "not in the stack's targets"),
    ('packages = ["rocm==7.14.0"]\nfind_links = "ftp://x"', "base.rocm_wheels.find_links", "invalid value"),
    ('packages = ["rocm==7.14.0"]\nextra = 1', "base.rocm_wheels.extra", "unknown field"),
])
def test_rocm_wheel_fields_are_checked(tmp_path, table, field, problem):
    with pytest.raises(InputFileError) as e:
        load_file(_write(tmp_path, base_extra=f"\n[base.rocm_wheels]\n{table}\n", components=_GIT))
    assert e.value.field == field and problem in e.value.message


def test_rocm_wheels_need_a_rocm_version(tmp_path):
    path = _write(tmp_path, rocm="none", base_extra='\n[base.rocm_wheels]\npackages = ["rocm==7.14.0"]\n',
                  components=_GIT)
    with pytest.raises(InputFileError, match="needs the stack's rocm version"):
        load_file(path)


def test_constrain_on_a_git_component_and_extras_in_constraints_are_refused(tmp_path):
    with pytest.raises(InputFileError) as e:
        load_file(_write(tmp_path, components=_GIT + "constrain = true\n"))
    assert e.value.field == "component[0] (greet).constrain"
    with pytest.raises(InputFileError) as e:
        load_file(_write(tmp_path, top='constraints = ["ray[default]==2.53.0"]', components=_GIT))
    assert e.value.field == "constraints[0]"


def test_cli_reports_a_bad_wheel_without_a_traceback(tmp_path):
    path = _write(tmp_path, components=_wheel(f'{{ url = "{_URL}", sha256 = "xyz" }}'))
    r = subprocess.run([sys.executable, "-m", "rocmkit", "render", "--stack-file", str(path), "--arch", "gfx942"],
                       capture_output=True, text=True, timeout=120, env=os.environ)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{path}: component[0] (pre).wheel.sha256: invalid value 'xyz'" in r.stderr
    assert "64 lower-case hex digits" in r.stderr


# ---- what the other tools make of them ----

def test_sbom_names_the_wheel_source_and_the_constraint_file():
    pytest.importorskip("cyclonedx")
    from rocmkit.image.sbom import bom, to_json

    _, manifest = rendered("gfx950")
    doc = json.loads(to_json(bom(manifest, {"amd-aiter": "0.1.19.post3+rocm7.14.0", "mori": "1.1.0"}, [], None)))
    aiter = next(c for c in doc["components"] if c["name"] == "amd-aiter")
    props = {p["name"]: p["value"] for p in aiter["properties"]}
    assert props["rocmkit:component"] == "aiter" and props["rocmkit:wheel-url"].endswith("linux_x86_64.whl")
    assert aiter["hashes"] == [{"alg": "SHA-256", "content": "0" * 63 + "1"}]
    mori = next(c for c in doc["components"] if c["name"] == "mori")
    assert {p["name"]: p["value"] for p in mori["properties"]}["rocmkit:requirement"] == "mori==1.1.0"
    image = doc["metadata"]["component"]["properties"]
    assert {"name": "rocmkit:constraints-file", "value": "/opt/rocmkit/constraints.txt"} in image
    assert {"name": "rocmkit:constraint", "value": "rocm-sdk-device-gfx950-dcgpu==7.14.0"} in image
    assert {"name": "rocmkit:rocm-from", "value": "wheels"} in image


def test_lock_reports_wheels_as_pinned_and_outdated_checks_only_the_index_pin(monkeypatch):
    from rocmkit.image import outdated
    from rocmkit.refs import lockrun

    stack = load_file(EXAMPLE)
    monkeypatch.setattr(lockrun, "_image", lambda ref, lock, resolved: lockrun.RefCheck(lockrun.OK, ref, ""))
    found = {f.what: f for f in lockrun.resolve(stack).findings}
    assert found[f"{lockrun.COMPONENT}aiter"].kind == lockrun.OK
    assert "sha256" in found[f"{lockrun.COMPONENT}aiter"].detail
    assert "outdated" in found[f"{lockrun.COMPONENT}mori"].detail

    checked = []
    monkeypatch.setattr(outdated, "check_image", lambda img, *_: outdated.PinCheck("base", "base-image", img, img))
    monkeypatch.setattr(outdated, "check_pip", lambda comp, kind, r, sources, py: checked.append((comp, r)) or
                        outdated.PinCheck(comp, kind, r, r))
    outdated.check(stack)
    assert ("mori", "mori==1.1.0") in checked and not any(c == "aiter" for c, _ in checked)


def test_wheelhouse_fetches_the_rocm_wheels_of_every_target_and_the_index_wheel():
    calls = pip_calls(load_file(EXAMPLE))
    rocm = calls[0]
    assert rocm.requirements == ("rocm[libraries,devel]==7.14.0", "rocm-sdk-device-gfx94X-dcgpu==7.14.0",
                                 "rocm-sdk-device-gfx950-dcgpu==7.14.0")
    assert rocm.find_links == ("https://rocm.example.invalid/whl/rocm/",)
    assert "mori==1.1.0" in calls[1].requirements
    assert "https://rocm.example.invalid/simple" in calls[1].extra_index_urls
