# SPDX-License-Identifier: GPL-3.0-or-later
"""The files a job is given, checked before any work and read: a motion or a character (BVH checks, Blender's
importers with their printing held back), a .blend opened, the armature picked among a file's, a bone map, and
where the output may be written. Everything wrong is a UsageError or a Failure naming it."""

import contextlib
import json
import math
import os
import re
import sys
import tempfile

from .errors import Failure, UsageError


@contextlib.contextmanager
def stdout_to_stderr():
    """Blender prints file loading and saving on standard output (from C): keep it for our JSON alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def check_writable(path, what, suffix=None, inputs=()):
    """UsageError unless a file can be written at path (its folder exists or can be made, and is writable; not a
    folder, not a read-only file; not one of the job's ``inputs``; ending in ``suffix``, or one of them, when
    given), before any work: found after a bake, the job's minutes were lost and its exit code was a failure's, not
    a usage error's."""
    suffixes = (suffix,) if isinstance(suffix, str) else tuple(suffix or ())
    if suffixes and not path.lower().endswith(suffixes):
        raise UsageError(f"{what} {path} must end in {' or '.join(suffixes)}")
    for given in inputs:
        if given and os.path.exists(given) and os.path.exists(path) and os.path.samefile(given, path):
            raise UsageError(f"{what} {path} is the input {given}: the job would write over it; give another "
                             "--output")
    if os.path.isdir(path):
        raise UsageError(f"cannot write {what} {path}: it is a folder")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: the file is read-only")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write {what} {path}: {e.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: the folder is not writable")


def need_file(path):
    """UsageError unless ``path`` is a file (a folder said so)."""
    if not os.path.isfile(path):
        raise UsageError(f"{path} is a folder, not a file" if os.path.isdir(path) else f"no such file: {path}")


def open_blend(bpy, path):
    """Open a .blend file (UsageError when it is missing, Failure when Blender cannot read it)."""
    need_file(path)
    with _importer_output():  # (Blender's own line of a file it cannot read: our error names it, once)
        try:
            bpy.ops.wm.open_mainfile(filepath=os.path.abspath(path), load_ui=False)
        except RuntimeError as e:
            raise Failure(f"cannot open {path}: {str(e).strip()}") from None


IMPORTERS = {".bvh": "bvh", ".fbx": "fbx", ".glb": "gltf", ".gltf": "gltf", ".blend": "blend"}


def bvh_frames(path):
    """(frames its header declares, frame lines it holds, seconds a frame, the frames (from 1) holding a value that
    is not a number: nan or inf) of a BVH file; Failure, naming what is wrong, when it is empty, not a BVH, or has no
    motion (Blender's importer fails there with an IndexError)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("latin-1").replace("\r\n", "\n").replace("\r", "\n")  # (old Macs' CR too)
    except OSError as e:
        raise Failure(f"cannot read the BVH {path}: {e}") from None
    if not text.strip():
        raise Failure(f"the BVH {path} is empty")
    if not text.lstrip().upper().startswith("HIERARCHY"):
        raise Failure(f"{path} is not a BVH file: it does not begin with HIERARCHY")
    motion = re.search(r"^\s*MOTION\s*$", text, re.M | re.I)
    frames = re.search(r"^\s*Frames:\s*([-+]?\d+)\s*$", text, re.M | re.I)
    step = re.search(r"^\s*Frame\s+Time:\s*(\S+)\s*$", text, re.M | re.I)
    if not (motion and frames and step):
        raise Failure(f"the BVH {path} has no motion (its MOTION section, Frames: or Frame Time: line is missing: "
                      "the file is cut short?)")
    if int(frames.group(1)) < 0:
        raise Failure(f"the BVH {path}: its Frames: line declares {frames.group(1)} frames")
    try:
        seconds = float(step.group(1))
    except ValueError:
        raise Failure(f"the BVH {path}: its Frame Time is not a number ({step.group(1)!r})") from None
    if not seconds > 0.0 or not math.isfinite(seconds):
        raise Failure(f"the BVH {path}: its Frame Time is {step.group(1)} (a frame lasts a positive time: 0.0083333 "
                      "at 120 frames a second)")
    lines = [line for line in text[step.end():].splitlines() if line.strip()]
    held = len(lines)
    if held == 0:
        raise Failure(f"the BVH {path} has no frames (its header declares {frames.group(1)}: the file is cut short?)")
    channels = sum(int(n) for n in re.findall(r"^\s*CHANNELS\s+(\d+)", text[:motion.start()], re.M | re.I))
    first_line = text[:step.end()].count("\n") + 2  # (the file's line of the first frame, blank lines aside)
    for i, line in enumerate(lines, start=1):
        values = line.split()
        try:
            numbers = [float(v) for v in values]
        except ValueError as e:
            raise Failure(f"the BVH {path}: frame {i} (near line {first_line + i - 1}) holds what is not a number "
                          f"({str(e).split(': ', 1)[-1]})") from None
        large = next((v for v in numbers if math.isfinite(v) and abs(v) > 1e9), None)
        if large is not None:  # (a thousand kilometres in millimetres: a damaged file, not a take)
            raise Failure(f"the BVH {path}: frame {i} (near line {first_line + i - 1}) holds {large:g}, out of any "
                          "take's range")
        if len(values) != channels:
            cut = " (the file is cut short?)" if i == held else ""
            raise Failure(f"the BVH {path}: frame {i} (near line {first_line + i - 1}) holds {len(values)} values, "
                          f"its hierarchy has {channels} channels{cut}")
    broken = [i for i, line in enumerate(lines, start=1) if re.search(r"nan|inf", line, re.I)]
    return int(frames.group(1)), held, seconds, broken


@contextlib.contextmanager
def _importer_output():
    """An importer's printing (standard output and error, from C and Python) held back: passed on to standard error
    when it succeeds, dropped when it fails (Blender prints the importer's whole traceback, twice; the error we
    raise names its last line)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 1)
        os.dup2(held.fileno(), 2)
        ok = False
        try:
            yield
            ok = True
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            if ok:
                held.seek(0)
                out = getattr(sys.stderr, "buffer", None)  # (a caller may have put a text stream there)
                out.write(held.read()) if out is not None else sys.stderr.write(held.read().decode(errors="replace"))
                sys.stderr.flush()


def load(bpy, path, what, bvh_scale=1.0, bvh_resample=False):
    """Bring the armatures (and what comes with them) of a motion or character file into the open scene;
    returns (the objects it added, {object: its name in the file}: a .blend's objects are renamed where the open
    file has their names). ``bvh_resample``: a BVH's keys at the scene's frame rate (Blender's importer's Scale
    FPS), not one a frame."""
    kind = IMPORTERS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise UsageError(f"the {what} {path!r} is not a .bvh, .fbx, .glb, .gltf or .blend file")
    need_file(path)
    before, named = set(bpy.data.objects), {}
    with _importer_output():
        try:
            if kind == "bvh":
                bpy.ops.import_anim.bvh(filepath=os.path.abspath(path), global_scale=bvh_scale, rotate_mode="NATIVE",
                                        use_fps_scale=bvh_resample)
            elif kind == "fbx":
                bpy.ops.import_scene.fbx(filepath=os.path.abspath(path))
            elif kind == "gltf":
                bpy.ops.import_scene.gltf(filepath=os.path.abspath(path))
            else:
                with bpy.data.libraries.load(os.path.abspath(path), link=False) as (src, dst):
                    names = list(src.objects)
                    dst.objects = list(names)
                for name, o in zip(names, dst.objects):
                    if o is not None:
                        bpy.context.scene.collection.objects.link(o)
                        named[o] = name
        except (RuntimeError, OSError) as e:
            text = str(e).strip()
            if "Traceback (most recent call last)" in text:  # the importer's own failure: its exception, the
                # last line not indented nor Blender's "Location: ..."
                lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln[:1].isspace()
                         and not ln.startswith(("Location:", "Traceback", "Error: Python: Traceback"))]
                text = "the importer failed: " + (lines[-1] if lines else "(no message)")
            raise Failure(f"cannot read the {what} {path}: {text}") from None
    added = [o for o in bpy.data.objects if o not in before]
    return added, {o: named.get(o, o.name) for o in added}


def same_file(bpy, path):
    """Whether ``path`` is the .blend file open now (Blender cannot load from it: its objects are here)."""
    here = bpy.data.filepath
    try:
        return bool(here) and os.path.samefile(here, path)
    except OSError:
        return False


def pick_armature(objects, name, what, option, named=None):
    """The armature of ``objects`` called ``name`` (in its file: ``named``, {object: name there}), or the only
    one, or the only humanoid among them; a UsageError (a name that is not there, or none given where several are)
    or a Failure (none at all) listing them otherwise."""
    arms = [o for o in objects if o.type == "ARMATURE"]
    label = (lambda o: named.get(o, o.name)) if named else (lambda o: o.name)  # noqa: E731
    if name:
        for o in arms:
            if label(o) == name:
                return o
        raise UsageError(f"no armature named {name!r} in the {what} (armatures: "
                      f"{', '.join(repr(label(o)) for o in arms) or 'none'})")
    if len(arms) == 1:
        return arms[0]
    if not arms:
        raise Failure(f"the {what} holds no armature")
    humanoids = [o for o in arms if _maps(o)]  # (a hat's or a prop's armature beside the character's)
    if len(humanoids) == 1:
        return humanoids[0]
    raise UsageError(f"pass {option}: the {what} has {len(arms)} armatures ({', '.join(repr(label(o)) for o in arms)})"
                  + (f", {len(humanoids)} of them humanoids" if humanoids else ", none of them a humanoid"))


def _maps(obj):
    """Whether an armature maps as a humanoid (rig.humanoid)."""
    from .rig import RigError
    from .rig.humanoid import map_humanoid

    try:
        map_humanoid(obj)
    except RigError:
        return False
    return True


def read_bone_map(path):
    """{role: bone} from a bone map JSON ({"roles": {...}} as saved, or the roles alone), or None."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read the bone map {path}: {e}") from None
    roles = data.get("roles", data) if isinstance(data, dict) else None
    if not isinstance(roles, dict) or not all(isinstance(v, str) for v in roles.values()):
        raise UsageError(f"the bone map {path} is not {{\"roles\": {{ROLE: BONE, ...}}}}")
    return roles
