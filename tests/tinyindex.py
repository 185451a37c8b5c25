"""Tiny wheels made with the stdlib (zipfile), and a package index of them served over real HTTP: a plain
directory in the PEP 503 layout (simple/<name>/index.html), which also answers PEP 691 JSON when asked to."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_wheel(dest: Path, name: str, version: str) -> Path:
    """A valid pure-Python wheel of `name` whose module reports its version."""
    dist = name.replace("-", "_")
    files = {
        f"{dist}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: rocmkit-tests\nRoot-Is-Purelib: true\n"
                                             "Tag: py3-none-any\n",
    }
    record = f"{dist}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{path},sha256={digest},{len(text.encode())}")
    files[record] = "\n".join(lines + [f"{record},,"]) + "\n"
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


def write_index(root: Path, wheels: list[Path], requires_python: dict[str, str] | None = None) -> Path:
    """root/simple/<name>/index.html (PEP 503) and index.json (PEP 691) listing `wheels` from root/files/."""
    requires_python = requires_python or {}
    by_name: dict[str, list[Path]] = {}
    for w in wheels:
        by_name.setdefault(w.name.split("-")[0].replace("_", "-").lower(), []).append(w)
    (root / "files").mkdir(parents=True, exist_ok=True)
    for name, ws in by_name.items():
        d = root / "simple" / name
        d.mkdir(parents=True, exist_ok=True)
        anchors, entries = [], []
        for w in ws:
            (root / "files" / w.name).write_bytes(w.read_bytes())
            rp = requires_python.get(w.name)
            attr = f' data-requires-python="{html.escape(rp)}"' if rp else ""
            anchors.append(f'<a href="../../files/{w.name}"{attr}>{w.name}</a>')
            entries.append({"filename": w.name, "url": f"../../files/{w.name}", "hashes": {},
                            **({"requires-python": rp} if rp else {})})
        (d / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(anchors) + "\n</body></html>\n")
        (d / "index.json").write_text(json.dumps({"meta": {"api-version": "1.0"}, "name": name, "files": entries}))
    return root


class _Handler(SimpleHTTPRequestHandler):
    def send_head(self):
        # PEP 691 content negotiation: a client asking for JSON gets index.json of a project page.
        if self.path.endswith("/") and "vnd.pypi.simple.v1+json" in self.headers.get("Accept", "") \
                and self.server.speaks_json:
            page = Path(self.translate_path(self.path)) / "index.json"
            if page.is_file():
                body = page.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                import io

                return io.BytesIO(body)
        return super().send_head()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(root: Path, *, speaks_json: bool = False):
    """Serve `root` over HTTP on localhost; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    server.speaks_json = speaks_json
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
