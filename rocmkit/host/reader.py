"""Kept for rocmkit.cluster.container and rocmkit.certify.target, which import the device nodes from here:
they live in rocmkit.host.facts.reader. Remove this module once those import that one."""

from .facts.reader import DeviceNodes, read_device_nodes

__all__ = ["DeviceNodes", "read_device_nodes"]
