# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals given as text, for a file that has none yet (a farm's bake): ``BONE:KIND:TARGET[:SUBTARGET][:key=value...]``
on the command line, or a JSON list of goals whose keys are the goal's settings (docs/goals.md).

A spec's kind is the first of its colon-separated parts that names a kind (POSITION, ORIENTATION, POSE, LOOK_AT,
DISTANCE, DISPLACEMENT, JOINT_VALUE; any case): the parts before it are the bone (a name may hold colons, as
Mixamo's do), those after it the target object and then a bone of it; ``key=value`` parts set the rest."""

import json
import math

from . import RigError
from .goals import GOAL_KINDS

# Settings a goal takes from text: the spec's key (and the JSON's, which may also use the setting's own name) ->
# the goal's setting and how its value reads.
_FLOAT = float
_BOOL = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}.__getitem__
KEYS = {
    "weight": ("weight", _FLOAT),
    "priority": ("priority", int),
    "tolerance": ("tolerance", _FLOAT),
    "angle_tolerance": ("angle_tolerance", _FLOAT),
    "tail": ("use_tail", lambda v: v if isinstance(v, bool) else _BOOL(str(v).lower())),
    "chain": ("chain_length", int),
    "min_distance": ("min_distance", _FLOAT),
    "value": ("joint_value", lambda v: math.radians(float(v))),  # (degrees)
    "point": ("point", lambda v: [float(x) for x in (v.split(",") if isinstance(v, str) else v)]),
    "enabled": ("enabled", lambda v: v if isinstance(v, bool) else _BOOL(str(v).lower())),
}
ALIASES = {setting: key for key, (setting, _) in KEYS.items()}  # (a JSON may use the setting's own name)


def parse_spec(spec):
    """One ``BONE:KIND:TARGET[:SUBTARGET][:key=value...]`` as a goal dict (the JSON's form); ValueError saying
    what is wrong."""
    parts = spec.split(":")
    settings = [p for p in parts if "=" in p]
    plain = [p for p in parts if "=" not in p]
    at = next((i for i, p in enumerate(plain) if p.upper() in GOAL_KINDS), None)
    if at is None or at == 0:
        raise ValueError(f"goal {spec!r}: BONE:KIND:TARGET[:SUBTARGET][:key=value...] with KIND one of "
                         f"{', '.join(k.lower() for k in GOAL_KINDS)}")
    goal = {"bone": ":".join(plain[:at]), "kind": plain[at].upper()}
    rest = plain[at + 1:]
    if rest:
        goal["target"] = rest[0]
    if len(rest) > 1:
        goal["subtarget"] = ":".join(rest[1:])
    for s in settings:
        key, value = s.split("=", 1)
        goal[key.strip()] = value.strip()
    return goal


def read_goal_file(path):
    """The goals of a JSON file (a list of goal dicts, or {"goals": [...]}); ValueError saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the goal file {path}: {e}") from None
    goals = data.get("goals") if isinstance(data, dict) else data
    if not isinstance(goals, list) or not all(isinstance(g, dict) for g in goals):
        raise ValueError(f"the goal file {path} holds no list of goals (a JSON list of objects, or {{\"goals\": "
                         "[...]}: docs/goals.md)")
    if not goals:
        raise ValueError(f"the goal file {path} holds an empty list: no goal to add")
    return goals


def add_goals(obj, goals):
    """Add ``goals`` (dicts: parse_spec's or a goal file's) to the armature ``obj``'s goals, checked first (a
    RigError names the first wrong one and nothing is added); returns how many were added."""
    import bpy

    checked = []
    for n, goal in enumerate(goals, start=1):
        what = f"goal {n} ({goal.get('bone', '?')}:{goal.get('kind', '?')})"
        kind = str(goal.get("kind", "")).upper()
        if kind not in GOAL_KINDS:
            raise RigError(f"{what}: no kind {goal.get('kind')!r} (one of {', '.join(GOAL_KINDS)})")
        bone = goal.get("bone")
        if bone not in obj.data.bones:
            raise RigError(f"{what}: {obj.name!r} has no bone {bone!r}")
        values = {"bone": bone, "kind": kind}
        target = goal.get("target")
        if target:
            ob = bpy.data.objects.get(target)
            if ob is None:
                raise RigError(f"{what}: no object named {target!r} in the file (the target)")
            values["target"] = ob
            sub = goal.get("subtarget")
            if sub:
                if ob.type != "ARMATURE" or sub not in ob.data.bones:
                    raise RigError(f"{what}: the target {target!r} has no bone {sub!r}")
                values["subtarget"] = sub
        elif GOAL_KINDS[kind].target and "point" not in goal:
            raise RigError(f"{what}: a {kind.lower()} goal needs a target object, or point=X,Y,Z")
        for key, value in goal.items():
            if key in ("bone", "kind", "target", "subtarget"):
                continue
            key = ALIASES.get(key, key)
            if key == "axis":
                axes = ("X", "Y", "Z") if kind == "JOINT_VALUE" else ("X", "Y", "Z", "-X", "-Y", "-Z")
                if str(value).upper() not in axes:
                    raise RigError(f"{what}: axis={value!r}: one of {', '.join(axes)}")
                values["joint_axis" if kind == "JOINT_VALUE" else "look_at_axis"] = str(value).upper()
                continue
            if key not in KEYS:
                raise RigError(f"{what}: no setting {key!r} (settings: {', '.join(sorted(KEYS))}, axis)")
            setting, read = KEYS[key]
            try:
                values[setting] = read(value)
            except (ValueError, KeyError, TypeError):
                raise RigError(f"{what}: {key}={value!r} is not a value it takes") from None
            if setting == "point" and len(values[setting]) != 3:
                raise RigError(f"{what}: point={value!r} needs three numbers X,Y,Z")
        checked.append(values)
    for values in checked:
        g = obj.fullbody_ik.goals.add()
        for setting in ("kind", "bone", "target", "subtarget"):  # (the kind first: the rest may depend on it)
            if setting in values:
                setattr(g, setting, values[setting])
        for setting, value in values.items():
            if setting not in ("kind", "bone", "target", "subtarget"):
                setattr(g, setting, value)
    return len(checked)
