"""The one image-reference reader (rocmkit/runtime/imageref.py), which build --tag, certify --image, a stack's
base image and the registry client all use."""

import pytest

from rocmkit.runtime.imageref import BadImageRef, ImageRef, parse

D = "sha256:" + "a" * 64


@pytest.mark.parametrize("ref, want", [
    ("ubuntu", ImageRef(None, "ubuntu")),
    ("rocm/dev-ubuntu-22.04:7.0.2-complete", ImageRef(None, "rocm/dev-ubuntu-22.04", "7.0.2-complete")),
    ("localhost:5000/a/b:c", ImageRef("localhost:5000", "a/b", "c")),
    ("registry.example.com:5000/x", ImageRef("registry.example.com:5000", "x")),
    (f"ghcr.io/o/i:1@{D}", ImageRef("ghcr.io", "o/i", "1", D)),
    (f"x@{D}", ImageRef(None, "x", None, D)),
])
def test_parts(ref, want):
    assert parse(ref) == want and str(want) == ref


@pytest.mark.parametrize("ref", ["Upper/case:1", "a b", "x:y:z", "-bad", "repo:" + "t" * 200, "a..b", "x@sha256:1",
                                 "bad image; rm -rf /", ""])
def test_refused(ref):
    with pytest.raises(BadImageRef):
        parse(ref)


def test_hub_normalisation_and_options():
    assert (parse("ubuntu").hub_registry, parse("ubuntu").hub_repository) == ("docker.io", "library/ubuntu")
    assert parse("o/i").hub_repository == "o/i"
    with pytest.raises(BadImageRef):
        parse(f"x@{D}", digest=False)
    assert parse("sha256:" + "b" * 64, image_id=True).image_id == "sha256:" + "b" * 64
    assert parse("sha256:" + "b" * 64).tag == "b" * 64  # without image_id: the repository sha256, tagged
