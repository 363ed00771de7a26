# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line, for batch jobs on render nodes.

Inside Blender (registered with ``bpy.utils.register_cli_command`` when the extension is enabled)::

    blender -b scene.blend -c fullbody_ik bake --armature NAME --frames 1-250 --output out.blend

With the pip ``bpy`` module, the same arguments and the file first::

    python -m fullbody_ik bake scene.blend --armature NAME --frames 1-250 --output out.blend
    python -m fullbody_ik batch bake --jobs 2 a.blend b.blend --output-dir baked/

Exit codes: 0 success, 1 failure, 2 bad arguments. ``--json`` prints one machine-readable JSON document on
standard output (everything else goes to standard error). A bake that cannot run writes nothing; a bake that
ran but missed its goals by more than ``--max-error`` (default 1 cm) on some frames exits 1, names those frames
and keeps its result for inspection.
"""

import argparse
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from . import batchjob
from .errors import Failure, UsageError
from .files import (
    bvh_frames, check_writable, load, need_file, open_blend, pick_armature, read_bone_map, same_file, stdout_to_stderr,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # raise instead of exiting: Blender's command handler returns the code
        raise UsageError(f"{self.prog}: {message}")


def _frames_options(p, independent=False):
    """How the frames are solved; ``independent`` the job's default (retarget: each frame from the copied pose)."""
    p.add_argument("--independent-frames", action=argparse.BooleanOptionalAction, default=independent,
                   help="solve each frame from the clip's own pose there, not from the previous frame's answer, in "
                        "parallel threads; --no-independent-frames tracks the previous frame's answer (default: "
                        + ("independent, as a frame's copied pose is the nearest answer to seek from; tracking "
                           "carried a bad pose through jumps and turns" if independent else
                           "tracked: measured smoother than independent frames, see docs/design.md") + ")")
    p.add_argument("--threads", type=_positive_int, metavar="N",
                   help="threads for independent frames (default: the cores, at most 4; FULLBODY_IK_THREADS)")


def _bake_options(p, command="bake"):
    if command == "bake":
        p.add_argument("--armature", help="armature object to bake (default: the only one with enabled goals; "
                                          "with --goal or --goals, the only armature)")
        p.add_argument("--goal", action="append", default=[], metavar="BONE:KIND:TARGET[:SUBTARGET][:key=value]",
                       help="a goal to add before baking (repeatable), e.g. RightHand:position:Target:chain=4 "
                            "(docs/goals.md)")
        p.add_argument("--goals", metavar="GOALS.json", help="goals to add before baking, from a JSON file "
                                                             "(docs/goals.md)")
    else:
        p.add_argument("--armature", help="the animated armature (default: the only armature in the file)")
        p.add_argument("--terrain", required=True, metavar="OBJ[,OBJ...]",
                       help="mesh objects to stand on (modifiers evaluated)")
        p.add_argument("--feet", metavar="ANKLE:BALL,ANKLE:BALL",
                       help="the feet by hand, e.g. LeftFoot:LeftToeBase,RightFoot:RightToeBase (default: found "
                            "from the skeleton's structure)")
        p.add_argument("--keep-reference-frames", action="store_true",
                       help="keep a pose held apart from the take at the range's start or end (CMU's first frame, a "
                            "calibration T-pose) in the default range: it is left out otherwise, and the report "
                            "says so")
    p.add_argument("--action", help="action to work on (default: the armature's current action)")
    p.add_argument("--frames", help="frame range FIRST-LAST (default: the scene's frame range)")
    p.add_argument("--step", type=int, default=1, help="every n-th frame (default 1)")
    if command == "bake":
        p.add_argument("--replace", action="store_true",
                       help="write into the current action (a backup copy is kept) instead of a new action")
        p.add_argument("--thin", type=_finite_non_negative, default=0.0, metavar="TOL",
                       help="drop keys the curve reproduces within TOL (default 0: key every frame)")
        p.add_argument("--continuity", type=_finite_non_negative, default=1e-4, metavar="W",
                       help="weight of staying near the previous frame's pose (default 1e-4)")
    from .solvers.methods import METHODS

    p.add_argument("--method", choices=list(METHODS), help="solver (default: the armature's settings)")
    p.add_argument("--time-limit", type=_finite_non_negative, metavar="SECONDS",
                   help="per frame (default: the armature's)")
    p.add_argument("--max-error", type=_non_negative, default=0.01, metavar="LENGTH",
                   help="a frame whose goal misses by more (world units; foot placement: a contact that far off "
                        "the terrain) fails the job: exit 1, the result kept for inspection (default 0.01: 1 cm; "
                        "inf accepts any error)")
    if command == "bake":
        p.add_argument("--max-angle", type=_non_negative, metavar="DEGREES",
                       help="the same for angular goals (default 1 degree; any angle with --max-error inf)")
        p.add_argument("--max-change", type=_non_negative, metavar="DEGREES",
                       help="fail the bake (exit 1, the result kept) when the bones off every goal's chain turn more "
                            "than this from the action (default: the report warns past 15 degrees)")
    _frames_options(p)
    p.add_argument("--report", metavar="PATH.png", help="save a plot of the bake report")
    p.add_argument("--json", action="store_true", help="print the report as JSON on standard output")


def _retarget_options(rt):
    """The retargeting's options (one source, or a batch of them)."""
    rt.add_argument("--source-object", help="the source armature, when the motion's file has several")
    rt.add_argument("--target-object", help="the character's armature, when its file has several")
    rt.add_argument("--action", help="the source's clip to use, when it has several (default: its active one)")
    rt.add_argument("--source-map", metavar="MAP.json", help="the source's bone map (a saved preset's JSON; "
                                                             "default: a preset whose bones it has, else found)")
    rt.add_argument("--target-map", metavar="MAP.json", help="the character's bone map, likewise (the format: "
                                                             "docs/bone-maps.md)")
    rt.add_argument("--feet", metavar="ANKLE:BALL,ANKLE:BALL",
                    help="the character's feet by hand, e.g. FootL:ToesL,FootR:ToesR (default: from its bone map, or "
                         "found from its structure)")
    rt.add_argument("--frames", help="FIRST-LAST of the source (default: its action's range)")
    rt.add_argument("--root", choices=("scaled", "kept", "in_place", "from-feet"), default="scaled",
                    help="the pelvis's travel: scaled by the legs' lengths (default), kept as the source's, in place, "
                         "or from-feet: an in-place clip (hips on a treadmill) given the travel its standing feet "
                         "imply, so it can walk on a terrain")
    rt.add_argument("--terrain", help="OBJ[,OBJ...] in the character's file to plant the feet on (default: its floor)")
    rt.add_argument("--no-ik", action="store_true", help="rotation copy only: do not plant the contacts")
    rt.add_argument("--keep-reference-frames", action="store_true",
                    help="keep a pose held apart from the take at the clip's start or end (CMU's first frame, a "
                         "calibration T-pose) in the default range: it is left out otherwise, and the report says so")
    rt.add_argument("--hands", action="store_true",
                    help="hold the hands where the source's are from its pelvis (scaled), with the contacts")
    rt.add_argument("--bvh-scale", type=_positive, default=1.0, metavar="S",
                    help="a BVH source's length unit in metres (default 1; the motion is scaled to the character "
                         "by hip heights anyway, except with --root kept)")
    rt.add_argument("--clip-rate", choices=("clip", "scene"), default="clip",
                    help="a BVH clip's frames: one key each (clip, the default, as Blender's importer: a 120 "
                         "frames/s clip in a 24 frames/s scene plays 5x slower), or resampled to the scene's frame "
                         "rate (scene: it plays as recorded)")
    rt.add_argument("--time-limit", type=_finite_non_negative, metavar="SECONDS",
                    help="per frame of the contact solve")
    rt.add_argument("--max-error", type=_non_negative, default=0.01, metavar="LENGTH",
                    help="a contact further off the floor fails the job (exit 1, result kept; default 0.01)")
    _frames_options(rt, independent=True)
    rt.add_argument("--report", metavar="PATH.png", help="save a plot of the contacts before and after")
    rt.add_argument("--json", action="store_true", help="print the report as JSON on standard output")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {text!r}")
    return value


def _non_negative(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (or inf), got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more (or inf), got {text!r}")
    return value


def _finite_non_negative(text):
    value = _non_negative(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, 0 or more, got {text!r}")
    return value


def _positive(text):
    value = _finite_non_negative(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def parser(inside_blender=False):
    prog = "blender -b FILE.blend -c fullbody_ik" if inside_blender else "python -m fullbody_ik"
    p = _Parser(prog=prog, description="Full-Body IK batch jobs")
    sub = p.add_subparsers(dest="command", required=True)
    bake = sub.add_parser("bake", help="bake the goals of an armature over a frame range into keyframes")
    bake.add_argument("file", nargs="?" if inside_blender else None,
                      help="the .blend file" + (" (default: the one Blender opened)" if inside_blender else ""))
    bake.add_argument("--output", "-o", help="where to save the result (default: FILE_baked.blend beside FILE)")
    _bake_options(bake)
    feet = sub.add_parser("footplant", help="plant the feet of an animated armature on terrain objects, baked "
                                            "into a new action")
    feet.add_argument("file", nargs="?" if inside_blender else None,
                      help="the .blend file" + (" (default: the one Blender opened)" if inside_blender else ""))
    feet.add_argument("--output", "-o", help="where to save the result (default: FILE_footplant.blend beside FILE)")
    _bake_options(feet, "footplant")
    rt = sub.add_parser("retarget", help="retarget a motion onto a character, its contacts planted, baked into a new "
                                         "action of the character")
    rt.add_argument("source", help="the motion: a .bvh, .fbx, .glb/.gltf or .blend file")
    rt.add_argument("target", help="the character: a .blend, .fbx or .glb/.gltf file")
    rt.add_argument("--output", "-o", help="where to save the character with its new action (default: "
                                           "TARGET_retarget.blend beside TARGET)")
    _retarget_options(rt)
    batch = sub.add_parser("batch", help="run a command on many files in parallel")
    batch_sub = batch.add_subparsers(dest="batch_command", required=True)
    for command, what in (("bake", "bake every file"), ("footplant", "plant the feet in every file"),
                          ("retarget", "retarget every motion file onto one character")):
        bb = batch_sub.add_parser(command, help=f"{what}, in parallel processes")
        bb.add_argument("files", nargs="+", help=".blend files" if command != "retarget" else
                        "motion files (.bvh, .fbx, .glb/.gltf, .blend)")
        bb.add_argument("--jobs", "-j", type=int, default=1, help="files worked on at once (default 1)")
        bb.add_argument("--scheduler", metavar="ADDRESS",
                        help="send one task per file to a running Dask scheduler (tcp://host:8786; files on "
                             "storage its workers see), or local:N for N workers started here; needs "
                             "dask[distributed] (default: --jobs processes on this machine)")
        bb.add_argument("--output-dir", help="where results go (default: beside each file, as "
                                             f"NAME_{SUFFIX[command]}.blend)")
        if command == "retarget":
            bb.add_argument("--target", required=True, help="the character: a .blend, .fbx or .glb/.gltf file")
            _retarget_options(bb)
        else:
            _bake_options(bb, command)
    return p


SUFFIX = {"bake": "baked", "footplant": "footplant", "retarget": "retarget"}
PLOT_TYPES = (".png", ".svg", ".pdf")  # what a report's plot is saved as (matplotlib's, from the name)


def parse_frames(text):
    """'1-250', '7' or '-10--1' -> (first, last); UsageError for anything else, or an inverted range."""
    m = re.fullmatch(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?", text)  # (frames may be negative: --frames=-10--1)
    if m is None:
        raise UsageError(f"--frames expects FIRST-LAST (like 1-250), got {text!r}")
    first = int(m.group(1))
    last = first if m.group(2) is None else int(m.group(2))
    if last < first:
        raise UsageError(f"--frames {text}: inverted range (the last frame comes before the first)")
    return first, last


def log(message):
    print(message, file=sys.stderr, flush=True)


def default_output(path, output_dir=None, command="bake"):
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(output_dir or os.path.dirname(os.path.abspath(path)), f"{stem}_{SUFFIX[command]}.blend")


def _find_armature(bpy, name, need_goals=True):
    arms = [o for o in bpy.data.objects if o.type == "ARMATURE"]
    if name:
        obj = bpy.data.objects.get(name)
        if obj is None or obj.type != "ARMATURE":
            listed = ", ".join(repr(o.name) for o in arms) or "none"
            raise UsageError(f"no armature named {name!r} in the file (armatures: {listed})")
        return obj
    if not arms:
        raise Failure("the file holds no armature")
    if not need_goals:
        if len(arms) == 1:
            return arms[0]
        listed = ", ".join(repr(o.name) for o in arms) or "none"
        raise UsageError(f"pass --armature: the file has {len(arms)} armatures ({listed})")
    with_goals = [o for o in arms if any(g.enabled for g in o.fullbody_ik.goals)]
    if len(with_goals) == 1:
        return with_goals[0]
    if not with_goals:
        raise Failure("no armature in the file has enabled Full-Body IK goals: give them with --goal "
                      "BONE:KIND:TARGET or --goals FILE.json (docs/goals.md), or add them in Blender")
    raise UsageError("several armatures have goals, pass --armature (one of "
                  f"{', '.join(repr(o.name) for o in with_goals)})")


def _check_terrain(bpy, names):
    """UsageError naming the first of ``names`` (the --terrain objects) that is not an object of the open file."""
    for name in names:
        if bpy.data.objects.get(name) is None:
            listed = ", ".join(repr(o.name) for o in bpy.data.objects if o.type == "MESH") or "none"
            raise UsageError(f"--terrain: no object named {name!r} in the file (meshes: {listed})")


def _check_feet(obj, spec):
    """UsageError when --feet names bones ``obj`` does not hold, or not a left and a right foot, before any work."""
    if not spec:
        return
    from .rig import RigError
    from .rig.feet import find_feet

    try:
        find_feet(obj, spec)
    except RigError as e:
        raise UsageError(f"--feet: {e}") from None


def _use_action(obj, name):
    import bpy
    from bpy_extras import anim_utils

    action = bpy.data.actions.get(name)
    if action is None:
        listed = ", ".join(repr(a.name) for a in bpy.data.actions) or "none"
        raise UsageError(f"no action named {name!r} in the file (actions: {listed})")
    if action.library is not None:
        raise Failure(f"action {name!r} is linked from {action.library.filepath!r} (read-only): make it local first")
    ad = obj.animation_data or obj.animation_data_create()
    ad.action = action
    if ad.action_slot is None:
        slot = anim_utils.action_get_first_suitable_slot(action, "OBJECT")
        ad.action_slot = slot or action.slots.new(id_type="OBJECT", name=obj.name)


def _open(args):
    """Open the job's file (or use the open one); (source path, output path). UsageError or Failure."""
    import bpy

    if args.step < 1:
        raise UsageError(f"--step must be 1 or more, got {args.step}")
    if args.file:
        open_blend(bpy, args.file)
        source = args.file
    else:
        source = bpy.data.filepath
        if not source and not args.output:
            raise UsageError("no .blend file loaded: give one, or --output")
    output = args.output or default_output(source, command=args.command)
    check_writable(output, "the output", ".blend", inputs=(source,))
    if args.report:
        check_writable(args.report, "the report", suffix=PLOT_TYPES)
    return source, output


def _armature(args, need_goals=True):
    import bpy

    obj = _find_armature(bpy, args.armature, need_goals)
    scene = bpy.context.scene
    if obj.name not in scene.objects:
        raise Failure(f"armature {obj.name!r} is not in the scene {scene.name!r}")
    if args.action:
        _use_action(obj, args.action)
    return obj, scene


def _progress(obj, what):
    last_shown = [-1]

    def progress(p):
        tenth = int(p * 10)
        if tenth != last_shown[0]:
            last_shown[0] = tenth
            log(f"  {what} {obj.name}: {int(p * 100)} %")
    return progress


def _save(output):
    import bpy

    with stdout_to_stderr():
        try:
            bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(output), copy=True)
        except RuntimeError as e:
            raise Failure(f"cannot save {output}: {str(e).strip()}") from None


def _finish(args, source, output, report, ok, verdict):
    """Save, plot, log; the JSON-able result (an "error" when the job missed: kept, but not a success)."""
    _save(output)
    result = {"file": source, "output": output, "ok": ok, "report": report.to_dict()}
    if args.report:
        report.plot(args.report)
        result["report_png"] = args.report
    log(report.text())
    log(f"saved {output}" + (f", plot {args.report}" if args.report else ""))
    if not ok:
        result["error"] = f"{verdict}; the result was saved to {output} for inspection"
    return result


def _prepare_solver(obj, method):
    """The compiled core compiled (or loaded) before a job's clock starts: a first compile (about 25 s on our test
    machine, once per machine) says so, and a job's first frame does not count it."""
    from .solvers import compiled

    method = method or getattr(getattr(getattr(obj, "fullbody_ik", None), "settings", None), "method", "")
    compiled.prepare("memetic" if method == "memetic" else "core")


def run_bake(args, inside_blender=False):
    """One bake; returns the JSON-able result. Raises UsageError or Failure."""
    from .rig import RigError
    from .rig.bake import BakeOptions, Baker

    from .rig.goal_specs import add_goals, parse_spec, read_goal_file

    frames = parse_frames(args.frames) if args.frames else None
    try:
        given = [parse_spec(g) for g in args.goal] + (read_goal_file(args.goals) if args.goals else [])
    except ValueError as e:
        raise UsageError(str(e)) from None
    source, output = _open(args)
    obj, scene = _armature(args, need_goals=not given)
    if given:
        try:
            add_goals(obj, given)
        except RigError as e:
            raise UsageError(str(e)) from None
    first, last = frames or (scene.frame_start, scene.frame_end)
    options = BakeOptions(first, last, args.step, args.replace, args.thin, args.continuity, args.method or "",
                          args.time_limit or 0.0, args.max_error,
                          None if args.max_angle is None else math.radians(args.max_angle),
                          independent=args.independent_frames, workers=args.threads or 0,
                          max_change=args.max_change)
    _prepare_solver(obj, args.method)
    try:
        report = Baker(scene, obj, options).run(progress=_progress(obj, "baking"))
    except RigError as e:
        raise Failure(str(e)) from None
    return _finish(args, source, output, report, report.ok, report.verdict()["text"])


def run_footplant(args, inside_blender=False):
    """One foot placement; returns the JSON-able result. Raises UsageError or Failure."""
    import bpy

    from .rig import RigError
    from .rig.footplant import FootOptions, foot_placement

    frames = parse_frames(args.frames) if args.frames else None
    terrain = [t.strip() for t in args.terrain.split(",") if t.strip()]
    if not terrain:
        raise UsageError("--terrain needs at least one object name")
    source, output = _open(args)
    obj, scene = _armature(args, need_goals=False)
    _check_terrain(bpy, terrain)
    _check_feet(obj, args.feet)
    first, last = frames or (scene.frame_start, scene.frame_end)
    reference, why = [], ""
    if frames is None and not args.keep_reference_frames:  # (a CMU clip's first frame: not part of the take)
        from .rig.evaluation import evaluating_only
        from .rig.takes import reference_frames

        with evaluating_only(scene, [obj]):
            reference, why = reference_frames(scene, obj, first, last)
        take = [f for f in range(first, last + 1) if f not in reference]
        first, last = (take[0], take[-1]) if take else (first, last)
    options = FootOptions(first, last, terrain, args.feet or "", args.step, args.method or "",
                          args.time_limit or 0.0, args.max_error, independent=args.independent_frames,
                          workers=args.threads or 0)
    _prepare_solver(obj, args.method)
    try:
        report = foot_placement(scene, obj, options, progress=_progress(obj, "placing the feet of"))
    except RigError as e:
        raise Failure(str(e)) from None
    if reference:
        report.warnings.append(f"left out of the range as not part of the take: {why} (--keep-reference-frames "
                               "keeps them)")
        report.reference_frames = reference
    return _finish(args, source, output, report, report.ok, report.verdict)


def run_retarget(args):
    """One retargeting; returns the JSON-able result. Raises UsageError or Failure."""
    import bpy

    from .rig import RigError
    from .rig.retarget import RetargetOptions, retarget

    frames = parse_frames(args.frames) if args.frames else (None, None)
    maps = read_bone_map(args.source_map), read_bone_map(args.target_map)  # bad maps refused before anything is loaded
    output = args.output or default_output(args.target, command="retarget")
    check_writable(output, "the output", ".blend", inputs=(args.source, args.target))
    for path in (args.source, args.target):  # (both there before either is read)
        need_file(path)
    clip = None  # a BVH's (frames declared, held, seconds a frame): a broken one said so before anything loads,
    # not as the importer's IndexError
    if os.path.splitext(args.source)[1].lower() == ".bvh" and os.path.isfile(args.source):
        clip = bvh_frames(args.source)
    if args.report:
        check_writable(args.report, "the report", suffix=PLOT_TYPES)
    if os.path.splitext(args.target)[1].lower() == ".blend":
        open_blend(bpy, args.target)
        characters = list(bpy.data.objects)
    else:
        with stdout_to_stderr():
            bpy.ops.wm.read_homefile(use_empty=True)
        characters = load(bpy, args.target, "target", args.bvh_scale)[0]
    target = pick_armature(characters, args.target_object, "target", "--target-object")
    if same_file(bpy, args.source):  # (the motion in the character's own file: its armature there, kept)
        added, named = [], {}
        source = pick_armature([o for o in bpy.data.objects if o != target], args.source_object,
                                "source (the character's own file, the target left out)", "--source-object")
    else:
        added, named = load(bpy, args.source, "source", args.bvh_scale, args.clip_rate == "scene")
        source = pick_armature(added, args.source_object, "source", "--source-object", named)
    warnings = _clip_warnings(bpy.context.scene, clip, args.clip_rate == "scene")
    if args.action:
        _use_action(source, args.action)
    _check_motion(source, named.get(source, source.name), args.source, target, args.target)
    terrain = [t.strip() for t in (args.terrain or "").split(",") if t.strip()]
    _check_terrain(bpy, terrain)
    _check_feet(target, args.feet)
    options = RetargetOptions(frames[0], frames[1], args.root.replace("-", "_"), not args.no_ik, terrain,
                              args.max_error, args.time_limit or 0.0, args.hands, *maps, feet=args.feet or "",
                              keep_reference_frames=args.keep_reference_frames,
                              independent=args.independent_frames, workers=args.threads or 0)
    if not args.no_ik:  # (the foot placement solves, with the character's own solver setting)
        _prepare_solver(target, None)
    try:
        report = retarget(bpy.context.scene, source, target, options,
                          progress=_progress(target, "retargeting onto"))
    except RigError as e:
        text = str(e)
        if "not a humanoid this can map" in text:
            which = "--source-map" if text.startswith(repr(source.name)) else "--target-map"
            text += f"; give its bones by hand: {which} MAP.json (the format: docs/bone-maps.md)"
        raise Failure(text) from None
    report.source = named.get(source, source.name)  # (as its file names it)
    for o in added:  # the source goes: the file holds the character with its new action
        bpy.data.objects.remove(o, do_unlink=True)
    if os.path.splitext(args.target)[1].lower() != ".blend":  # a character imported into a new scene: its range
        # (Blender's 1-250) was nobody's choice: it plays the new action, no frozen pose after it for the next job
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = report.frames[0], report.frames[-1]
    verdict = report.feet.verdict if report.feet is not None else "rotation copy (no contacts planted)"
    result = _finish(args, args.source, output, report, report.ok, verdict)
    for w in warnings:
        log(f"fullbody_ik retarget: warning: {w}")
    return dict(result, warnings=warnings)


def _check_motion(source, name, source_path, target, target_path):
    """A source with no motion, or a character given where the motion goes (the two files swapped), is refused by
    name (exit 2) before any work."""
    skinned = lambda arm: any(o.type == "MESH" and (o.parent == arm or any(  # noqa: E731
        m.type == "ARMATURE" and m.object == arm for m in o.modifiers)) for o in arm.users_scene[0].objects) \
        if arm.users_scene else False
    usage = "retarget MOTION CHARACTER: the motion file first, the character second"
    if skinned(source) and not skinned(target) and os.path.splitext(target_path)[1].lower() == ".bvh":
        raise UsageError(f"the source {source_path} is a character (a skinned mesh) and the target {target_path} a "
                         f"BVH skeleton: the two look swapped ({usage})")
    ad = source.animation_data
    action = ad.action if ad is not None else None
    if action is None:
        raise UsageError(f"the source {name!r} ({source_path}) has no motion (no action): {usage}")
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(action, ad.action_slot) if ad.action_slot else None
    curves = list(bag.fcurves) if bag is not None else []
    moving = any(len({round(k.co[1], 6) for k in fc.keyframe_points}) > 1 for fc in curves)
    if not moving:
        raise UsageError(f"the source {name!r} ({source_path}) does not move: its action {action.name!r} holds "
                         f"{'no keys' if not curves else 'one pose'} ({usage})")


def _clip_warnings(scene, clip, resampled=False):
    """What a user should know of a BVH clip that imported (``clip``: bvh_frames', None for other sources): fewer
    frames than its header declares, a frame rate other than the scene's (unless ``resampled`` to it: the importer
    keys one clip frame a scene frame)."""
    if clip is None:
        return []
    from .rig.bake_report import frame_ranges

    declared, held, step, broken = clip
    out = []
    if held < declared:
        out.append(f"the BVH declares {declared} frames and holds {held} (the file is cut short?): {held} were read")
    if broken:
        out.append(f"the BVH's frame{'s' if len(broken) > 1 else ''} {frame_ranges(broken, most=12)} (counted from 1) "
                   "hold values that are not numbers (nan or inf): the clip is broken there; check those frames of "
                   "the result")
    scene_fps = scene.render.fps / scene.render.fps_base
    if step > 0 and abs(1.0 / step - scene_fps) > 0.01 * scene_fps and not resampled:
        clip_fps = 1.0 / step
        ratio = clip_fps / scene_fps
        out.append(f"the clip was recorded at {clip_fps:.4g} frames/s and the scene plays {scene_fps:.4g}: one key a "
                   f"clip frame plays it {ratio:.3g}x {'slower' if ratio > 1 else 'faster'} than recorded (--clip-rate "
                   f"scene resamples it to the scene's rate; or set the scene's frame rate to {clip_fps:.4g})")
    return out


def _job(file, args, output, program=None):
    """One file's job for batchjob.run_file: the command, the file, where its result goes, the options, and how
    to run it (program: None lets the machine running it choose: batchjob.program)."""
    command = args.batch_command
    if command == "retarget":  # a motion file onto the character: both named on the command line
        options = [os.path.abspath(args.target), "--max-error", repr(args.max_error), "--root", args.root,
                   "--bvh-scale", repr(args.bvh_scale), "--clip-rate", args.clip_rate]
        flags = [("--source-object", args.source_object), ("--target-object", args.target_object),
                 ("--action", args.action), ("--frames", args.frames), ("--terrain", args.terrain),
                 ("--time-limit", args.time_limit),
                 ("--source-map", args.source_map and os.path.abspath(args.source_map)),
                 ("--target-map", args.target_map and os.path.abspath(args.target_map)), ("--feet", args.feet)]
        options += (["--no-ik"] if args.no_ik else []) + (["--hands"] if args.hands else []) + \
            (["--keep-reference-frames"] if args.keep_reference_frames else [])
        flags.append(("--threads", args.threads))
    else:
        options = ["--step", str(args.step), "--max-error", repr(args.max_error)]
        flags = [("--armature", args.armature), ("--action", args.action), ("--frames", args.frames),
                 ("--method", args.method), ("--time-limit", args.time_limit), ("--threads", args.threads)]
        if command == "bake":
            options += ["--thin", repr(args.thin), "--continuity", repr(args.continuity)]
            options += [f"--goal={g}" for g in args.goal]
            flags += [("--max-angle", args.max_angle), ("--goals", args.goals and os.path.abspath(args.goals)),
                      ("--max-change", args.max_change)]
            if args.replace:
                options.append("--replace")
        else:
            flags += [("--terrain", args.terrain), ("--feet", args.feet)]
            options += ["--keep-reference-frames"] if args.keep_reference_frames else []
    options.append("--independent-frames" if args.independent_frames else "--no-independent-frames")
    for flag, value in flags:
        if value is not None:  # (one argument: a value may begin with "-", a negative frame range or a name)
            options.append(f"{flag}={value}")
    return {"command": command, "file": os.path.abspath(file), "output": os.path.abspath(output),
            "options": options, "program": program}


def _local_program():
    """How this machine's batch runs its jobs: Blender itself when we run inside it, else this Python."""
    import bpy

    binary = getattr(bpy.app, "binary_path", "")
    blender = binary and os.path.basename(binary).lower().startswith("blender")
    return ("blender", binary) if blender else ("python", sys.executable)


def run_batch(args):
    if args.jobs < 1:
        raise UsageError(f"--jobs must be 1 or more, got {args.jobs}")
    if args.report:
        raise UsageError("--report is per file: use bake, or read each file's JSON report")
    if args.frames:
        parse_frames(args.frames)
    outputs = [os.path.abspath(default_output(f, args.output_dir, args.batch_command)) for f in args.files]
    clash = sorted({o for o in outputs if outputs.count(o) > 1})
    if clash:
        raise UsageError(f"several files would be saved as {clash[0]}: give files distinct names or leave out "
                         "--output-dir (each result is then saved beside its file)")
    started = time.perf_counter()  # (each job makes its output's folder: nothing is made for a batch that fails)
    if args.scheduler:  # a Dask cluster: one task per file, each run as the worker's machine runs jobs
        from .cluster import run_on_dask

        results, where = run_on_dask(args.scheduler, [_job(f, args, o) for f, o in zip(args.files, outputs)],
                                     args.batch_command, log)
        results = [dict(r, file=f) for r, f in zip(results, args.files)]  # the files as the user named them
    else:
        program = _local_program()

        def one(file, job):
            entry = dict(batchjob.run_file(job), file=file)
            log(f"  {'done' if entry['ok'] else 'FAILED'}: {file} ({entry['seconds']:.1f} s)")
            return entry

        where = f"{args.jobs} jobs"
        log(f"{args.batch_command}: {len(args.files)} files, {args.jobs} at a time")
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(one, args.files, [_job(f, args, o, program) for f, o in zip(args.files, outputs)]))
    seconds = time.perf_counter() - started
    log(summary_table(results))
    failed = sum(not r["ok"] for r in results)
    done = "baked" if args.batch_command == "bake" else "done"
    log(f"{len(results) - failed} of {len(results)} files {done} in {seconds:.1f} s ({where})"
        + (f"; {failed} failed" if failed else ""))
    return {"jobs": None if args.scheduler else args.jobs, "scheduler": args.scheduler, "seconds": seconds,
            "files": results, "failed": failed}


def summary_table(results):
    rows = [["file", "status", "frames", "met", "mean mm", "max mm", "ms/frame", "seconds"]]
    for r in results:
        if "report" in r:
            rep = r["report"]
            # a bake's summary, a foot placement's (its bake), a retargeting's (its contacts' bake, if planted)
            s = rep.get("summary") or (rep.get("bake") or {}).get("summary") or \
                ((rep.get("feet") or {}).get("bake") or {}).get("summary")
            status = "ok" if r["ok"] else f"FAILED ({r['exit']}): {r.get('error', '')}"
            mm = (lambda v: "-" if v is None else f"{v:.3f}")
            if s is None:
                rows.append([os.path.basename(r["file"]), status, "", "", "", "", "", f"{r['seconds']:.1f}"])
                continue
            rows.append([os.path.basename(r["file"]), status, str(s["frames"]), str(s["solved_frames"]),
                         mm(s["mean_error_mm"]), mm(s["max_error_mm"]), f"{s['ms_per_frame']:.1f}",
                         f"{r['seconds']:.1f}"])
        else:
            rows.append([os.path.basename(r["file"]), f"FAILED ({r['exit']}): {r['error']}", "", "", "", "", "",
                         f"{r['seconds']:.1f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def _failed(want_json, command, code, error):
    """A job that did not run: the error on standard error and, with --json, as the one JSON document on standard
    output ({"ok": false, "exit": code, "error": ...}: a farm reading standard output gets one either way)."""
    log(f"fullbody_ik {command}: error: {error}" if command else f"{error}\n(see --help)")
    if want_json:
        print(json.dumps({"ok": False, "exit": code, "error": error, "command": command}), flush=True)
    return code


def main(argv, inside_blender=False):
    """Parse and run; returns the exit code."""
    want_json = any(len(a) > 3 and "--json".startswith(a) for a in map(str, argv))  # (argparse takes "--js" too)
    try:
        args = parser(inside_blender).parse_args(argv)
        if getattr(args, "threads", None) and not getattr(args, "independent_frames", False):
            raise UsageError("--threads applies to --independent-frames (tracked frames are solved in turn)")
    except UsageError as e:
        return _failed(want_json, None, EXIT_USAGE, str(e))
    except SystemExit as e:  # --help
        return int(e.code or 0)
    want_json = bool(getattr(args, "json", False))
    try:
        if args.command == "bake":
            result = run_bake(args, inside_blender)
        elif args.command == "footplant":
            result = run_footplant(args, inside_blender)
        elif args.command == "retarget":
            result = run_retarget(args)
        else:
            result = run_batch(args)
    except UsageError as e:
        return _failed(want_json, args.command, EXIT_USAGE, str(e))
    except Failure as e:
        return _failed(want_json, args.command, EXIT_FAILED, f"{e} (nothing was written)")
    except KeyboardInterrupt:
        return _failed(want_json, args.command, EXIT_INTERRUPTED, "interrupted")
    except Exception as e:  # a bug of ours: say so with the traceback, and still exit cleanly
        import traceback

        traceback.print_exc()
        return _failed(want_json, args.command, EXIT_FAILED,
                       f"unexpected failure ({type(e).__name__}: {e}; the traceback above); nothing was written")
    if args.json:
        print(json.dumps(result), flush=True)
    if args.command == "batch" and result["failed"]:
        return EXIT_FAILED
    if args.command in ("bake", "footplant", "retarget") and not result["ok"]:
        log(f"fullbody_ik {args.command}: error: {result['error']}")
        return EXIT_FAILED
    return EXIT_OK


def blender_command(argv):
    """The handler ``bpy.utils.register_cli_command`` calls with the arguments after ``-c fullbody_ik``."""
    return main(list(argv), inside_blender=True)
