"""The type verl declares for each value a user set, asked of verl itself in the target Python: a value of the wrong
type (`data.max_prompt_length=5l2`, `optim.lr=le-6`, `trainer.total_epochs=fifteen`) composes, and verl 0.9's
main_ppo converts its sections by hydra.instantiate, which checks no types, so it fails only where the value is
first used, after Ray and the models have started (torch's optimizer, the dataset filter, the epoch loop).

Where the type comes from, in verl's order of authority:
1. the dataclass verl builds the section into (the nearest `_target_` above the key, e.g.
   verl.workers.config.FSDPOptimizerConfig for actor_rollout_ref.actor.optim), its field's annotation;
2. else the type of verl's YAML default for the key (data.* and trainer.* have no dataclass).
OmegaConf then says whether the value fits, as verl's own typed conversion (utils/config.py,
omega_conf_to_dataclass with a dataclass_type) would. None passes where verl allows it: an Optional field, a null
default, or a key the engine's section leaves out. Stdlib only at import: config_check.py imports it beside itself.
"""

from __future__ import annotations

SCALARS = (int, float, bool)  # the types a typo in a number or a flag breaks; str, Literal and enums are left to verl


def _owner(get, key: str):
    """The dataclass verl builds the key's section into, and the key's path below that section."""
    import dataclasses

    parts = key.split(".")
    for i in range(len(parts) - 1, -1, -1):
        target = get(".".join(parts[:i] + ["_target_"])) if i else get("_target_")
        if not isinstance(target, str) or not target:
            continue
        try:
            from hydra.utils import get_class

            cls = get_class(target)
        except Exception:  # noqa: BLE001 - a _target_ this Python cannot import: no declared type to ask
            return None
        return (cls, parts[i:]) if dataclasses.is_dataclass(cls) else None
    return None


def _unwrap(tp):
    """(the type inside Optional[...], whether None is allowed)."""
    import types
    import typing

    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), len(args) < len(typing.get_args(tp))
    return tp, tp is typing.Any


def declared(get, key: str):
    """(type, None allowed, the field's default, where it is declared) from verl's dataclass, or None."""
    import dataclasses
    import inspect
    import typing

    found = _owner(get, key)
    if not found:
        return None
    cls, path = found
    for depth, name in enumerate(path):
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # noqa: BLE001 - an annotation this Python cannot evaluate
            return None
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name not in fields or name not in hints:
            return None
        tp, optional = _unwrap(hints[name])
        if depth < len(path) - 1:  # a nested section without its own _target_: its dataclass's fields
            if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
                return None
            cls = tp
            continue
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else None
        try:
            where = inspect.getsourcefile(cls).replace("\\", "/")
            where = where[where.rindex("verl/"):] if "verl/" in where else where
        except (TypeError, ValueError):
            where = cls.__module__
        return tp, optional, default, f"{where}, {cls.__name__}.{name}"
    return None


def fits(tp, optional: bool, value) -> bool:
    """Whether OmegaConf takes the value for a field of this type, as verl's typed conversion merges it."""
    import dataclasses

    from omegaconf import MISSING, OmegaConf
    from omegaconf.errors import ValidationError

    field_type = tp | None if optional else tp
    typed = dataclasses.make_dataclass("Typed", [("v", field_type, dataclasses.field(default=MISSING))])
    try:
        OmegaConf.merge(OmegaConf.structured(typed), {"v": value})
    except ValidationError:
        return False
    return True


def _name(tp) -> str:
    return {int: "an int", float: "a float", bool: "a bool (True or False)"}[tp]


def problems(get, keys, default_of=None) -> list[dict]:
    """A finding for each key whose value is not of the type verl declares. get: the resolved value of a key;
    keys: those the user set; default_of: the value of a key in verl's config before the user's overrides (None
    where not known: then only the keys a dataclass types are checked)."""
    out = []
    for key in dict.fromkeys(k.lstrip("+~") for k in keys):
        value = get(key)
        if isinstance(value, (dict, list)) or (value is None and key.rpartition(".")[2] == "_target_"):
            continue
        base = default_of(key) if default_of else None
        said = declared(get, key)
        if said:
            tp, optional, default, source = said
            default = base if default_of and base is not None else default
            optional = optional or base is None  # a null in verl's YAML: verl's own default is None
        elif default_of and type(base) in SCALARS:  # the YAML default's own type; null only where it is null
            tp, optional, default, source = type(base), False, base, None
        else:
            continue
        if tp not in SCALARS or (value is None and optional) or fits(tp, optional, value):
            continue
        message = f"{key}={value}: verl wants {_name(tp)} (its default {default}" + \
            (f"; {source})" if source else ")")
        out.append({"rule": "type", "keys": [key], "severity": "error", "source": source, "message": message,
                    "text": message,
                    "fix": f"{key}={default}" if default is not None else None})
    return out


class _Unusable(BaseException):
    """A check read a value that failed its type or range check. A BaseException, so that a check's own `except
    Exception` (verl's registries looked up in a try) does not take it for its finding."""


def unless_bad(check, get, bad: set[str], what: str) -> list:
    """check(get) on the config, or a note that it was not run where it reads a value said wrong above (`bad`):
    the checks that do not read one still run, so one pass reports every error it can find."""
    def guarded(key: str):
        if key in bad:
            raise _Unusable(key)
        return get(key)
    try:
        return check(guarded)
    except _Unusable as exc:
        key = exc.args[0]
        text = f"{what}: not checked, since it needs {key}, whose value is wrong (said above)"
        return [{"rule": "not-checked", "keys": [key], "severity": "note", "fix": None, "source": None,
                 "message": text, "text": text}]
