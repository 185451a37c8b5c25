"""A CycloneDX SBOM of an image, made inside it by the final stage of every build (`python -m
rocmkit.image.sbom OUT`): the Python distributions installed (pkg:pypi), the dpkg packages (pkg:deb), the
manifest's git components with their commits (pkg:github, or pkg:generic with vcs_url) and the base image
(pkg:oci by digest when the manifest knows it, else pkg:docker by reference). A prebuilt wheel component
carries its URL and sha256; the image's pip constraint file and its exact pins are properties of the image.

The CycloneDX library is not installed in the image: the build mounts a copy of it (sbomlib.py) for this
one step, so the image's Python environment stays what the stack declared. `bom()` is pure; the readers
below it take the file system's root so tests can point them anywhere.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

SBOM_PATH = "/opt/rocmkit/sbom.cdx.json"
PROP = "rocmkit"  # property names are rocmkit:<what>
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    arch: str


@dataclass(frozen=True)
class OS:
    id: str  # debian, ubuntu
    codename: str


def _norm(name: str) -> str:
    """PEP 503 normalisation, which pkg:pypi names use (packaging's canonicalize_name, written out: this module
    runs in the image's Python, standard library only; tests/test_sbom.py runs it so)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- purls ----

def _image_parts(ref: str) -> tuple[str | None, str, str, str | None]:
    """(registry or None for Docker Hub, repository, tag or "", digest or None), by the registry client's
    parsing; Docker Hub's implicit library/ is left off, as the purl spec writes official images."""
    from ..refs.registry import DOCKER_HUB, parse_image

    img = parse_image(ref, default_tag="")
    hub = img.registry == DOCKER_HUB
    repo = img.repository.removeprefix("library/") if hub else img.repository
    return (None if hub else img.registry), repo, img.tag, ref.partition("@")[2] or None


def base_image_purl(ref: str, digest: str | None):
    """pkg:oci/<name>@sha256:… when the digest is known (the content), else pkg:docker/<repo>@<tag>."""
    from packageurl import PackageURL

    registry, repo, tag, ref_digest = _image_parts(ref)
    digest = digest or ref_digest
    namespace, _, name = repo.rpartition("/")
    if digest and DIGEST_RE.match(digest):
        qualifiers = {"repository_url": f"{registry or 'docker.io'}/{repo}"}
        if tag:
            qualifiers["tag"] = tag
        return PackageURL(type="oci", name=name.lower(), version=digest, qualifiers=qualifiers)
    return PackageURL(type="docker", namespace=namespace or None, name=name, version=tag or "latest",
                      qualifiers={"repository_url": registry} if registry else None)


def git_purl(name: str, url: str, version: str):
    from packageurl import PackageURL

    m = re.match(r"^(?:https?://|git@|ssh://git@)github\.com[/:]([^/]+)/([^/]+?)(?:\.git)?/?$", url)
    if m:
        return PackageURL(type="github", namespace=m.group(1).lower(), name=m.group(2).lower(), version=version)
    return PackageURL(type="generic", name=name, version=version, qualifiers={"vcs_url": f"git+{url}@{version}"})


# ---- the document ----

def bom(manifest: dict, distributions: dict[str, str], debs: list[Deb], os_release: OS | None):
    """The Bom: one component per distribution, dpkg package, manifest git component and the base image.
    Every manifest component is findable by the property rocmkit:component (a pip component on the
    distributions its requirements name)."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    from .. import __version__

    def prop(name: str, value) -> Property:
        return Property(name=f"{PROP}:{name}", value=str(value))

    pypi: dict[str, Component] = {}
    for name, version in sorted(distributions.items()):
        pypi[_norm(name)] = Component(name=name, version=version, bom_ref=f"pypi:{_norm(name)}",
                                      purl=PackageURL(type="pypi", name=_norm(name), version=version))
    others: list[Component] = []
    for c in manifest.get("components", []):
        if c["kind"] in ("pip", "wheel"):
            for req in c.get("requirements") or [c["requirement"]]:
                req_name = _norm(re.split(r"[\s\[<>=!~;@(]", req, 1)[0])
                comp = pypi.get(req_name)
                if comp is None:  # not installed (removed after install): recorded as declared
                    pinned = re.search(r"==\s*([^\s;,]+)", req)
                    comp = Component(name=req_name, version=pinned.group(1) if pinned else None,
                                     bom_ref=f"pypi:{req_name}", purl=PackageURL(type="pypi", name=req_name,
                                                                                 version=pinned.group(1) if pinned else None))
                    comp.properties.add(prop("installed", "false"))
                    pypi[req_name] = comp
                comp.properties.add(prop("component", c["name"]))
                comp.properties.add(prop("requirement", req))
                if c.get("url"):  # a prebuilt wheel: where it came from, and the bytes the build verified
                    comp.properties.add(prop("wheel-url", c["url"]))
                    comp.hashes.add(HashType(alg=HashAlgorithm.SHA_256, content=c["sha256"]))
            continue
        local = c.get("local_source")
        version = c.get("commit") or c.get("mutable_ref") or "unknown"
        if local:
            purl = PackageURL(type="generic", name=c["name"], qualifiers={"checksum": f"sha256:{local['digest']}"})
        else:
            purl = git_purl(c["name"], c["git"], version)
        comp = Component(name=c["name"], version=None if local else version, bom_ref=f"git:{c['name']}", purl=purl,
                         external_references=[ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(c["git"]))])
        comp.properties.add(prop("component", c["name"]))
        if c.get("tag"):
            comp.properties.add(prop("tag", c["tag"]))
        if not c.get("commit") and not local:
            comp.properties.add(prop("mutable-ref", c.get("mutable_ref")))
        if local:
            comp.properties.add(prop("local-source-sha256", local["digest"]))
        others.append(comp)
    for d in debs:
        qualifiers = {"arch": d.arch}
        if os_release and os_release.codename:
            qualifiers["distro"] = os_release.codename
        others.append(Component(name=d.name, version=d.version, bom_ref=f"deb:{d.name}:{d.arch}",
                                purl=PackageURL(type="deb", namespace=os_release.id if os_release else "debian",
                                                name=d.name, version=d.version, qualifiers=qualifiers)))
    base_ref = manifest.get("base_image", "")
    if base_ref:
        digest = manifest.get("base_image_digest")
        _, _, tag, ref_digest = _image_parts(base_ref)
        base = Component(name=base_ref.split("@")[0], type=ComponentType.CONTAINER, bom_ref="base-image",
                         version=digest or ref_digest or tag or "latest",
                         purl=base_image_purl(base_ref, digest))
        base.properties.add(prop("role", "base-image"))
        others.append(base)

    doc = Bom(components=[*pypi.values(), *others])
    image = Component(name=f"rocmkit/{manifest.get('stack', 'image')}", type=ComponentType.CONTAINER,
                      version=manifest.get("inputs_hash", "unknown")[:12], bom_ref="image")
    for key in ("stack", "rocm", "python", "inputs_hash"):
        if manifest.get(key):
            image.properties.add(prop(key.replace("_", "-"), manifest[key]))
    if manifest.get("targets"):
        image.properties.add(prop("targets", ";".join(manifest["targets"])))
    constraints = manifest.get("constraints")
    if constraints:  # the pip constraint file the image sets, and the exact pins it holds
        image.properties.add(prop("constraints-file", constraints["path"]))
        for pin in constraints["pins"]:
            image.properties.add(prop("constraint", pin))
    rocm_wheels = manifest.get("base_rocm_wheels")
    if rocm_wheels:
        image.properties.add(prop("rocm-from", "wheels"))
    doc.metadata.component = image
    doc.metadata.tools.components.add(Component(name="rocmkit", version=__version__, type=ComponentType.APPLICATION))
    doc.register_dependency(image, list(doc.components))
    return doc


def to_json(doc) -> str:
    from cyclonedx.output.json import JsonV1Dot6

    return JsonV1Dot6(doc).output_as_string(indent=1) + "\n"


# ---- reading the image's file system ----

def read_dpkg_status(root: Path) -> list[Deb]:
    """Installed packages from dpkg's status file (none when the image has no dpkg)."""
    path = root / "var/lib/dpkg/status"
    if not path.is_file():
        return []
    out = []
    for para in path.read_text(errors="replace").split("\n\n"):
        fields = {}
        for line in para.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Version") and fields.get("Status", "").endswith(" installed"):
            out.append(Deb(fields["Package"], fields["Version"], fields.get("Architecture", "all")))
    return sorted(out, key=lambda d: (d.name, d.arch))


def read_os_release(root: Path) -> OS | None:
    for rel in ("etc/os-release", "usr/lib/os-release"):
        path = root / rel
        if path.is_file():
            fields = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
            value = {k: v.strip().strip('"') for k, v in fields.items()}
            return OS(id=value.get("ID", "debian"), codename=value.get("VERSION_CODENAME", ""))
    return None


def installed_distributions(exclude: list[Path]) -> dict[str, str]:
    """name → version of every distribution this Python sees, first on sys.path winning (as imports do);
    those under `exclude` (the mounted CycloneDX library) are not the image's."""
    import importlib.metadata

    out: dict[str, str] = {}
    seen: set[str] = set()
    excluded = [p.resolve() for p in exclude]
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or _norm(name) in seen:
            continue
        where = Path(str(dist.locate_file(""))).resolve()
        if any(where == e or e in where.parents for e in excluded):
            continue
        seen.add(_norm(name))
        out[name] = dist.version
    return out


def main(argv: list[str] | None = None) -> int:
    from ..fileio import write_atomic

    parser = argparse.ArgumentParser(prog="python -m rocmkit.image.sbom",
                                     description="Write the CycloneDX SBOM of the image this runs in.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--manifest", type=Path, default=Path("/opt/rocmkit/manifest.json"))
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="a folder whose distributions are not the image's (repeatable)")
    parser.add_argument("--root", type=Path, default=Path("/"))
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest.read_text())
    doc = bom(manifest, installed_distributions(args.exclude), read_dpkg_status(args.root),
              read_os_release(args.root))
    write_atomic(args.out, to_json(doc))
    print(f"wrote {args.out}: {len(doc.components)} components", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
