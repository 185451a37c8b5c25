"""The modules verl's main_ppo imports on its way to training, read from the target's own verl source (no import):
main_ppo.py's imports wherever they are (its TaskRunner imports transfer_queue inside run()), and the module-level
imports of every verl module they reach. An import under `try` or `if` is verl's own optional one (a backend, a
GPU library) and is left out. verl 0.9.1 imports transfer_queue unconditionally and declares it only in its
[verl-core] extra, so a venv of `pip install verl` failed in its Ray actor after start-up with "No module named
'transfer_queue'"; the setup finds such a module first. Stdlib only: it runs in the target."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ENTRY = "verl.trainer.main_ppo"
# the distribution that installs a module whose name is not its distribution's (verl's own [verl-core] pins)
DISTRIBUTION = {"transfer_queue": "TransferQueue", "hydra": "hydra-core"}


def _imports(tree: ast.AST, everywhere: bool) -> list[str]:
    out: list[str] = []

    def visit(node, guarded: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            reached = not guarded and (everywhere or not in_function)
            if isinstance(child, ast.Import) and reached:
                out.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and reached and child.level == 0 and child.module:
                out.extend([child.module] + [f"{child.module}.{a.name}" for a in child.names])
            visit(child, guarded or isinstance(child, (ast.Try, ast.If)),
                  in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(tree, False, False)
    return out


def imported(verl_root: Path) -> set[str]:
    """The top-level modules outside verl and the standard library that main_ppo's path imports."""
    seen: set[str] = set()
    outside: set[str] = set()
    todo = [(ENTRY, True)]
    while todo:
        module, everywhere = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        base = verl_root.parent / module.replace(".", "/")
        path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not path.is_file():
            continue  # `from verl.x import name`: a name, not a module
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError):
            continue  # verl's own import says what is wrong with it
        for name in _imports(tree, everywhere):
            parts = name.split(".")
            if parts[0] == "verl":
                todo += [(".".join(parts[:i]), False) for i in range(1, len(parts) + 1)]
            elif parts[0] not in sys.stdlib_module_names and parts[0] != "__future__":
                outside.add(parts[0])
    return outside


def missing() -> list[str]:
    """The modules main_ppo's path imports that this Python cannot find, sorted; [] without verl."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.origin:
        return []
    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):  # a finder that refuses it: it cannot be imported either
            return True

    return sorted(m for m in imported(Path(spec.origin).parent) if absent(m))


def refusal(names: list[str] | None) -> tuple[str, str] | None:
    """(message, hint) for modules verl imports that the target lacks; None when there are none."""
    if not names:
        return None
    dists = [DISTRIBUTION.get(m, m) for m in names]
    return (f"verl's main_ppo imports {', '.join(names)}, which this Python lacks: its Ray workers would fail "
            "after verl's start-up; nothing was started",
            f"pip install {' '.join(dists)} (rocmkit's [verl] extra installs what verl 0.9.1 imports: "
            "pip install 'rocmkit[verl]'; verl declares TransferQueue only in its [verl-core] extra)")
