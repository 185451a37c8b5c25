"""Generates test stacks and their local components for the build tests and benchmarks/build_dag.py.

Each component is a small setuptools project built by the rendered Dockerfile's `pip wheel` step.
Compiled ones carry C extension modules whose size sets how long they take to compile; every
component records into its wheel (buildinfo.json) when its build started and ended, the MAX_JOBS it
saw and how many compile jobs it ran, and what its `needs` reported at build time, so a test can
show from the image itself that stages ran concurrently, that MAX_JOBS arrived and that a dependency's
wheel was installed first.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    units: int = 0  # C extension modules; 0 = pure Python
    functions: int = 400  # generated C functions per module: compile time grows with it
    needs: tuple[str, ...] = ()
    revision: int = 1  # bump to change the component's content (and so its digest)
    fail: bool = False  # the C code carries an #error: the build of this component fails
    sleep_s: float = 0  # the build waits this long in `sleep` (a build that outlasts a --timeout)
    extra_files: dict[str, str] = field(default_factory=dict)  # relative path (under the package) → text

    @property
    def package(self) -> str:
        return self.name.replace("-", "_")


def _c_module(pkg: str, unit: int, functions: int, revision: int, fail: bool) -> str:
    # Functions the optimiser cannot fold away, each a little different, so -O2 has real work to do.
    body = []
    for i in range(functions):
        body.append(
            f"static long f{i}(long x) {{ long s = {i + revision}; for (int k = 0; k < 64; k++) "
            f"{{ s = s * 6364136223846793005L + (x ^ (k * {2 * i + 1})); if (s & {1 << (i % 20)}) s ^= s >> {i % 13 + 1}; }}"
            f" return s & 0xffff; }}")
    calls = " + ".join(f"f{i}(1)" for i in range(functions)) or "0"
    error = '#error "component broken on purpose: this compile must fail"\n' if fail else ""
    return (f"#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n{error}"
            + "\n".join(body)
            + f"\nstatic PyObject *value(PyObject *self, PyObject *args) {{ return PyLong_FromLong({calls}); }}\n"
            f"static PyMethodDef methods[] = {{{{\"value\", value, METH_NOARGS, \"\"}}, {{NULL, NULL, 0, NULL}}}};\n"
            f"static struct PyModuleDef mod = {{PyModuleDef_HEAD_INIT, \"_u{unit}\", NULL, -1, methods}};\n"
            f"PyMODINIT_FUNC PyInit__u{unit}(void) {{ return PyModule_Create(&mod); }}\n")


_SETUP = '''\
import json, os, time
from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

NAME, PKG, UNITS, NEEDS, SLEEP_S = {name!r}, {pkg!r}, {units!r}, {needs!r}, {sleep_s!r}


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None and os.environ.get("MAX_JOBS"):
            self.parallel = int(os.environ["MAX_JOBS"])  # as torch's and vLLM's extensions do


class RecordedBuild(build):
    """Records start, end, MAX_JOBS and what the needed components report into the wheel."""

    def run(self):
        start = time.time()
        if SLEEP_S:
            import subprocess
            subprocess.run(["sleep", str(SLEEP_S)], check=True)
        needs = {{}}
        for n in NEEDS:
            mod = __import__(n.replace("-", "_"))  # installed in this stage from the needed component's wheel
            needs[n] = mod.value()
        super().run()
        ext = self.get_finalized_command("build_ext")
        info = {{"component": NAME, "start": start, "end": time.time(), "max_jobs": os.environ.get("MAX_JOBS"),
                "parallel": ext.parallel if UNITS else None, "needs": needs}}
        target = os.path.join(self.build_lib, PKG, "buildinfo.json")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            json.dump(info, f)


setup(
    ext_modules=[Extension(f"{{PKG}}._u{{i}}", [f"src/{{PKG}}/_u{{i}}.c"], extra_compile_args=["-O2"]) for i in range(UNITS)],
    cmdclass={{"build": RecordedBuild, "build_ext": BuildExt}},
)
'''

_INIT = '''\
"""Test component {name} (revision {revision})."""
import json
from importlib import resources

REVISION = {revision}
{imports}


def value():
    return {value}


def buildinfo():
    return json.loads(resources.files(__name__).joinpath("buildinfo.json").read_text())
'''


def write_component(root: Path, spec: ComponentSpec) -> Path:
    """Write the component's source tree under root/<name> and return that folder."""
    d = root / spec.name
    pkg = d / "src" / spec.package
    pkg.mkdir(parents=True, exist_ok=True)
    deps = ", ".join(json.dumps(n) for n in spec.needs)
    (d / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools", "wheel"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{spec.name}"
        version = "1.0.{spec.revision}"
        dependencies = [{deps}]

        [tool.setuptools.packages.find]
        where = ["src"]

        [tool.setuptools.package-data]
        "*" = ["*.json", "**/*.json"]
        """))
    (d / "setup.py").write_text(_SETUP.format(name=spec.name, pkg=spec.package, units=spec.units, needs=list(spec.needs),
                                           sleep_s=spec.sleep_s))
    imports = "\n".join(f"from . import _u{i}" for i in range(spec.units))
    terms = [f"_u{i}.value()" for i in range(spec.units)]
    terms += [f"__import__({n.replace('-', '_')!r}).value()" for n in spec.needs]
    (pkg / "__init__.py").write_text(_INIT.format(name=spec.name, revision=spec.revision, imports=imports,
                                                  value=" + ".join(terms) or str(spec.revision)))
    for i in range(spec.units):
        (pkg / f"_u{i}.c").write_text(_c_module(spec.package, i, spec.functions, spec.revision, spec.fail))
    for rel, text in spec.extra_files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def write_stack(path: Path, name: str, base_image: str, specs: list[ComponentSpec], *, post: tuple[str, ...] = (),
                targets: tuple[str, ...] = ("gfx942", "gfx950"), rocm: str = "none", python: str = "3.11") -> Path:
    """A stack file of the normal format whose components are `specs`, built from --source folders.
    Their git pins are placeholders: the tests always give every component with --source."""
    lines = [
        'schema = "rocmkit.stack/v1"',
        f'name = "{name}"',
        'description = "Generated test stack: local components, some compiled, one depending on another"',
        f"targets = {json.dumps(list(targets))}",
        f'rocm = "{rocm}"',
        f'python = "{python}"',
        f"post = {json.dumps(list(post))}",
        "",
        "[base]",
        f'image = "{base_image}"',
        'python_from = "image"',
        "apt = []",
    ]
    for i, spec in enumerate(specs):
        lines += ["", "[[component]]", f'name = "{spec.name}"', f'git = "https://example.invalid/test/{spec.name}.git"',
                  f'commit = "{i + 1:040x}"']
        if spec.needs:
            lines.append(f"needs = {json.dumps(list(spec.needs))}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def source_options(root: Path, specs: list[ComponentSpec]) -> list[str]:
    out = []
    for spec in specs:
        out += ["--source", f"{spec.name}={root / spec.name}"]
    return out


# A stand-in for SGLang's installed layout: the config folders `rocmkit vf-configs` looks in, with files
# keyed by device name (shapes from sgl-project/sglang: quantization/configs, fused_moe_triton/configs/
# triton_x_y_z, and the newer moe_runner/triton_utils/configs).
SGLANG_CONFIGS = {
    "srt/layers/quantization/configs/N=1536,K=7168,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8,block_shape=[128, 128].json":
        '{"1": {"BLOCK_SIZE_M": 16}}\n',
    "srt/layers/quantization/configs/N=1536,K=7168,device_name=AMD_Instinct_MI325X,dtype=fp8_w8a8,block_shape=[128, 128].json":
        '{"1": {"BLOCK_SIZE_M": 32}}\n',
    "srt/layers/moe/fused_moe_triton/configs/triton_3_1_0/E=256,N=256,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8,block_shape=[128, 128].json":
        '{"1": {"BLOCK_SIZE_M": 64}}\n',
    "srt/layers/moe/moe_runner/triton_utils/configs/triton_3_1_0/E=8,N=4096,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8.json":
        '{"1": {"BLOCK_SIZE_M": 128}}\n',
}


def sglang_spec() -> ComponentSpec:
    """A pure-Python package named sglang carrying SGLANG_CONFIGS as package data."""
    files = dict(SGLANG_CONFIGS)
    for rel in SGLANG_CONFIGS:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "configs" in parts[:i]:
                break
            files.setdefault("/".join(parts[:i] + ["__init__.py"]), "")
    return ComponentSpec("sglang", extra_files=files)


# The stack the build tests and the benchmark use: two compiled components that take seconds each,
# a pure-Python one, and one that needs a compiled one.
def default_specs(functions: int = 400, units: int = 2) -> list[ComponentSpec]:
    return [
        ComponentSpec("alpha", units=units, functions=functions),
        ComponentSpec("beta", units=units, functions=functions),
        ComponentSpec("gamma"),
        ComponentSpec("delta", units=1, functions=max(1, functions // 4), needs=("alpha",)),
    ]
