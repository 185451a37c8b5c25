"""The verdict lines every probe's judge shares: a figure passes at >= PASS_AT of what a healthy GPU of its
product delivers, warns from WARN_AT, fails below; the link budget of a GPU-to-GPU figure; how figures are
written in titles. Every probe finding's area (and its id's first part) is AREA.
"""

from __future__ import annotations

from typing import Any

from ..model import Status

AREA = "probe"  # the probes' findings: probe.<measure>
PASS_AT = 0.85
WARN_AT = 0.60


def fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def verdict(value: float, expected: float) -> Status:
    q = value / expected
    return Status.PASS if q >= PASS_AT else Status.WARN if q >= WARN_AT else Status.FAIL


def link_budget(gpus: list[dict], key: str, peak_of) -> tuple[Any, float | None, float | None, str | None]:
    """(product, link peak, expected fraction, None), or the reason a link figure of these GPUs is not judged:
    one known, unpartitioned product with link figures and an expected fraction `key` in the arch table."""
    from ... import archs  # here, not above: the workers run inside a target import this module (AREA)

    products = {g.get("product") for g in gpus}
    if len(products) != 1 or None in products:
        return None, None, None, f"products {sorted(str(p) for p in products)}: not one known product"
    if any(int(g.get("partitions") or 1) > 1 for g in gpus):
        return None, None, None, "partitioned GPUs: the data sheet gives no per-partition link figure"
    product = archs.product_named(next(iter(products)))
    if product is None:
        return None, None, None, f"{next(iter(products))} is not in the arch table"
    peak, fraction = peak_of(product), product.expected_fraction(key)
    if peak is None:
        return product, None, None, f"no GPU-to-GPU link figures for {product.name} in the arch table"
    if fraction is None:
        return product, peak, None, f"no expected fraction '{key}' for {product.name} in the arch table"
    return product, peak, fraction, None
