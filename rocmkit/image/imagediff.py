"""`rocmkit diff`: what differs between two rocmkit images, or their manifests — pins, Python packages,
environment, arch targets, base image — as changed, added and removed. Reading is at the edge (load);
comparing is pure (compare)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..errors import Failed, UsageError
from .plan import MANIFEST_PATH

MANIFEST_SCHEMA = "rocmkit.manifest/v1"
TIMEOUT_S = 120
# Prints every installed distribution of the image's Python (the one on its PATH: /opt/venv in rocmkit images).
_LIST_PACKAGES = ("import json, importlib.metadata as m\n"
                  "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))")
# Manifest fields with a section of their own; every other field is compared under "other".
_OWN = {"components", "base_pip", "runtime_env", "targets", "inputs_hash"}


@dataclass
class Side:
    name: str  # what the user gave
    kind: str  # "image" or "manifest"
    manifest: dict
    packages: dict[str, str] | None = None  # canonical name → version (images only)
    env: dict[str, str] | None = None  # the image's ENV (images only)
    image_id: str | None = None
    repo_digests: tuple[str, ...] = ()
    labels: dict[str, str] | None = None


def _check_manifest(doc, where: str) -> dict:
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
        raise UsageError(f"{where}: not a rocmkit manifest (schema {MANIFEST_SCHEMA})",
                         hint=f"give an image built by rocmkit, or its {MANIFEST_PATH} copied out")
    return doc


def load(arg: str, docker: str | None = None) -> Side:
    """A manifest file when `arg` names a file, else an image in the Docker engine."""
    p = Path(arg)
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{p}: cannot read ({exc})") from None
        except ValueError as exc:
            raise UsageError(f"{p}: not JSON ({exc})") from None
        return Side(arg, "manifest", _check_manifest(doc, str(p)))
    from ..runtime import imageref

    if not imageref.is_ref(arg, image_id=True):  # "" or a path that is not there: never asked of the engine
        raise UsageError(f"{arg!r} is neither a file nor an image reference",
                         hint="give a manifest file, or an image the engine has (rocmkit build, or docker pull)")
    return _load_image(arg, docker)


def _load_image(ref: str, docker: str | None) -> Side:
    from ..runtime.container import run_container
    from ..runtime.docker_client import run_cli
    from ..runtime.docker_engine import Engine

    engine = Engine.connect()
    info = engine.image(ref)
    if info is None:
        raise UsageError(f"{ref!r} is neither a file nor an image in the Docker engine",
                         hint="give a manifest file, or an image the engine has (rocmkit build, or docker pull)")
    try:
        manifest = engine.read_json(info.id, MANIFEST_PATH)
    except ValueError:
        raise UsageError(f"image {ref}: {MANIFEST_PATH} is not JSON") from None
    if manifest is None:
        raise UsageError(f"image {ref} has no {MANIFEST_PATH}: it was not built by rocmkit",
                         hint="diff compares rocmkit images (or their manifests); build with `rocmkit build`")
    _check_manifest(manifest, f"image {ref}: {MANIFEST_PATH}")
    config = engine.client.api.inspect_image(info.id).get("Config") or {}
    env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
    result, _ = run_container(info.id, ["python", "-c", _LIST_PACKAGES], what=f"package list of {ref}",
                              timeout=TIMEOUT_S, docker=docker or run_cli(), gpus=False, keep_stdout=True,
                              extra=["--network=none"])
    try:
        listed = json.loads("\n".join(result.stdout or []))
    except ValueError:
        raise Failed(f"could not list the Python packages of {ref} (exit {result.returncode})",
                     hint="output:\n  " + "\n  ".join(result.tail[-8:])) from None
    packages = {canonicalize_name(k): v for k, v in listed.items()}
    return Side(ref, "image", manifest, packages=packages, env=env, image_id=info.id, repo_digests=info.digests,
                labels=info.labels)


# ---- comparing ----

def _maps(a: dict, b: dict) -> dict:
    """changed / added / removed between two flat maps (values compared as they are)."""
    return {"changed": {k: [a[k], b[k]] for k in sorted(a.keys() & b.keys()) if a[k] != b[k]},
            "added": {k: b[k] for k in sorted(b.keys() - a.keys())},
            "removed": {k: a[k] for k in sorted(a.keys() - b.keys())}}


def _empty(section: dict) -> bool:
    return not any(section.get(k) for k in ("changed", "added", "removed"))


def _req_map(reqs: list) -> dict[str, str]:
    from packaging.requirements import Requirement

    out = {}
    for r in reqs or []:
        try:
            out[canonicalize_name(Requirement(r).name)] = r
        except Exception:  # noqa: BLE001 - a requirement rocmkit did not write is compared as text
            out[r] = r
    return out


def _components(a: list, b: list) -> dict:
    ca = {c.get("name"): c for c in a or [] if isinstance(c, dict)}
    cb = {c.get("name"): c for c in b or [] if isinstance(c, dict)}
    changed = {}
    for name in sorted(ca.keys() & cb.keys()):
        fields = {k: [ca[name].get(k), cb[name].get(k)] for k in sorted(ca[name].keys() | cb[name].keys())
                  if ca[name].get(k) != cb[name].get(k)}
        if fields:
            changed[name] = fields
    return {"changed": changed, "added": {n: cb[n] for n in sorted(cb.keys() - ca.keys())},
            "removed": {n: ca[n] for n in sorted(ca.keys() - cb.keys())}}


def _base(side: Side, labels: bool) -> dict:
    """base_image, base_image_overridden, whatever else records the base (a digest, once locked), and with
    labels (both sides images) the OCI base.* labels."""
    out = {k: v for k, v in side.manifest.items() if k.startswith("base_image")}
    for k, v in (side.labels or {}).items() if labels else ():
        if k.startswith("org.opencontainers.image.base."):
            out[k] = v
    return out


def compare(a: Side, b: Side) -> dict:
    ma, mb = a.manifest, b.manifest
    components = _components(ma.get("components"), mb.get("components"))
    base_pip = _maps(_req_map(ma.get("base_pip")), _req_map(mb.get("base_pip")))
    both_images = a.env is not None and b.env is not None
    env = _maps(a.env, b.env) if both_images else _maps(ma.get("runtime_env") or {}, mb.get("runtime_env") or {})
    if a.packages is not None and b.packages is not None:
        packages = {"compared": True, **_maps(a.packages, b.packages)}
    else:
        packages = {"compared": False, "why": "a manifest file lists pins, not the installed packages: "
                                              "packages are compared between two images"}
    ta, tb = list(ma.get("targets") or []), list(mb.get("targets") or [])
    targets = {"changed": {}, "added": {t: True for t in tb if t not in ta}, "removed": {t: True for t in ta if t not in tb}}
    other_keys = {k for k in (ma.keys() | mb.keys()) - _OWN - {"schema"} if not k.startswith("base_image")}
    other = _maps({k: ma.get(k) for k in other_keys}, {k: mb.get(k) for k in other_keys})
    sections = {
        "pins": {"components": components, "base_pip": base_pip},
        "packages": packages,
        "environment": {"source": "image ENV" if both_images else "manifest runtime_env", **env},
        "targets": targets,
        "base": _maps(_base(a, both_images), _base(b, both_images)),
        "other": other,
    }
    different = not (_empty(components) and _empty(base_pip) and _empty(env) and _empty(targets)
                     and _empty(sections["base"]) and _empty(other) and (not packages["compared"] or _empty(packages)))
    return {"a": _describe(a), "b": _describe(b), "identical": not different, **sections}


def _describe(side: Side) -> dict:
    out = {"name": side.name, "kind": side.kind, "stack": side.manifest.get("stack"),
           "inputs_hash": side.manifest.get("inputs_hash")}
    if side.kind == "image":
        out.update({"id": side.image_id, "repo_digests": list(side.repo_digests)})
    return out


# ---- text ----

def _short(v) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return text if len(text) <= 100 else text[:97] + "..."


def _lines(section: dict, prefix: str = "") -> list[str]:
    out = [f"  ~ {prefix}{k}: {_short(a)} -> {_short(b)}" for k, (a, b) in section.get("changed", {}).items()]
    out += [f"  + {prefix}{k}" + ("" if v is True else f": {_short(v)}") for k, v in section.get("added", {}).items()]
    out += [f"  - {prefix}{k}" + ("" if v is True else f": {_short(v)}") for k, v in section.get("removed", {}).items()]
    return out


def text(doc: dict) -> str:
    out = [f"rocmkit diff: {doc['a']['name']} -> {doc['b']['name']}"]
    for key in ("a", "b"):
        d = doc[key]
        ident = f"{d['kind']}" + (f" {d['id'][:19]}" if d.get("id") else "")
        out.append(f"  {key.upper()}: {d['name']} ({ident}, stack {d['stack']}, inputs hash {str(d['inputs_hash'])[:12]})")
    comp = doc["pins"]["components"]
    pins = []
    for name, fields in comp["changed"].items():
        pins += [f"  ~ component {name}: {f} {_short(a)} -> {_short(b)}" for f, (a, b) in fields.items()]
    pins += [f"  + component {n}" for n in comp["added"]] + [f"  - component {n}" for n in comp["removed"]]
    pins += _lines(doc["pins"]["base_pip"], prefix="base pip ")
    sections = [("pins", pins), ("packages", _lines(doc["packages"]) if doc["packages"]["compared"] else
                                 [f"  (not compared: {doc['packages']['why']})"]),
                (f"environment ({doc['environment']['source']})", _lines(doc["environment"])),
                ("targets", _lines(doc["targets"])), ("base image", _lines(doc["base"])), ("other", _lines(doc["other"]))]
    for title, lines in sections:
        out.append(f"{title}:" + ("" if lines else " same"))
        out += lines
    out.append("identical" if doc["identical"] else "different")
    return "\n".join(out) + "\n"
