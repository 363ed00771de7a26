# SPDX-License-Identifier: GPL-3.0-or-later
"""Terrain-adaptive foot placement, baked into keyframes (paper 000 §IV-G, extended): the job.

From the source motion: the sole points of each foot (heel, ball and its two sides, toe tip), their contacts
with the source floor (height and speed, with hysteresis and a minimum duration; or the contact channels a
user edited), and the terrain under them (rays cast down, several terrain objects); every frame's targets
planned (rig.foot_plan), position goals on them and a displacement goal keeping the body on the source motion.
Solved frame by frame by the tracker and keyed by the Baker (a new action; the source untouched), then judged on
the pose Blender shows.
"""

import json
import time
from dataclasses import dataclass, field

import numpy as np

from .armature import RigError
from .bake import BakeOptions, Baker, check_bake, outside_warning
from .bake_report import keep_report
from .contacts import CONTACT_PREFIX, write_contacts
from .feet import find_feet
from .foot_goals import FootGoals, driven_by_rig, rig_controls
from .foot_plan import plan
from .foot_report import FEET_REPORT_PROPERTY, FootReport, foot_metrics, side_views
from .reading import one_job_each_call
from .terrain import Terrain

@dataclass
class FootOptions:
    frame_start: int
    frame_end: int
    terrain: list  # terrain object names
    feet: str = ""  # "ANKLE:BALL,ANKLE:BALL" by hand; empty: found from names
    step: int = 1
    method: str = ""
    time_limit: float = 0.0
    max_error: float = 0.01  # world units: a contact point further off the terrain than this fails the job
    blend_frames: int = 3  # swing targets blend into and out of contacts over this many frames
    pelvis_smoothing: float = 0.3  # seconds: the pelvis offset is averaged over this window
    body_weight: float = 1e-4  # weight of staying on the source pose (displacement goal; radians vs metres)
    held: dict = field(default_factory=dict)  # {bone: (F, 3) world targets of its head}: also held (not judged)
    # Points in contact touch the terrain, the foot turned so that they all do (retargeting: a clip on another
    # character, whose copied feet stand tilted and above or below its floor); else (a clip placed on terrain)
    # they keep the clip's clearance over its floor and the foot its tilt.
    on_floor: bool = False
    # Sides of the feet whose contact channels were keyed by a detector (the retargeting's, on its source), not
    # edited by a user: a foot it missed fails the job as one detected here would.
    detected_contacts: tuple = ()
    # Each frame solved from the source's pose there, not from the previous frame's answer: frames in parallel
    # (BakeOptions.independent); ``workers``: threads (0: automatic).
    independent: bool = False
    workers: int = 0
    # {side: (F,) how high that foot's ankle should rise over where it stands (world), a value a planned frame}:
    # the retargeting's, the source's scaled to the character's hips; its swing is raised or lowered to within a
    # tenth of it.
    swing_rise: dict = field(default_factory=dict)


def check_feet_input(obj, options):
    if options.frame_end < options.frame_start:
        raise RigError(f"inverted frame range {options.frame_start}-{options.frame_end}")
    if obj.animation_data is None or obj.animation_data.action is None:
        raise RigError(f"{obj.name!r} has no action to place the feet of")


def _terrain_objects(names):
    """The terrain objects named (a RigError naming the meshes there are for a name that is none)."""
    import bpy

    objects = []
    for name in names:
        t = bpy.data.objects.get(name)
        if t is None:
            listed = ", ".join(repr(o.name) for o in bpy.data.objects if o.type == "MESH") or "none"
            raise RigError(f"no terrain object named {name!r} (meshes: {listed})")
        objects.append(t)
    return objects


def _check_plan(plan_, obj, frames, objects):
    """A RigError for a plan with nothing to plant: no contact in the motion, or no terrain under any contact."""
    if not plan_.contacts.any():
        raise RigError(f"no contact found in the motion of {obj.name!r} over frames {frames[0]}-{frames[-1]} (no sole "
                       "point rests near its lowest height): nothing to plant; key the fbik_contact_* channels by "
                       "hand (1 where a sole point touches), or check the frames")
    if not (plan_.contacts & plan_.hits).any():
        raise RigError(f"no terrain under the feet of {obj.name!r} at any contact: nothing to plant; is the terrain "
                       f"({', '.join(o.name for o in objects)}) under the character?")


def _verdict(worst, options, bake_report, untouched):
    """The job's verdict in words: its worst contact against options.max_error, the bake's goals missed, the feet
    that stood with no contact detected (``untouched``)."""
    if worst <= options.max_error:
        verdict = f"contacts within {options.max_error * 1e3:g} mm of the terrain (worst {worst * 1e3:.2f} mm)"
    else:
        verdict = f"a contact is {worst * 1e3:.1f} mm off the terrain (more than {options.max_error * 1e3:g} mm)"
    if not bake_report.ok:
        verdict += f"; {bake_report.verdict()['text']}"
    if untouched:
        sides = " and ".join(untouched)
        where = "the source's" if options.detected_contacts else "its"
        channels = ", ".join(f"{CONTACT_PREFIX}_{side}_*" for side in untouched)
        verdict += (f"; the {sides} foot stands while another swings but no contact of it was detected: it is "
                    f"neither planted nor judged; key {where} {channels} channels where it touches (all 0 if it "
                    "never does)")
    return verdict


def _heel_heights(feet, sampler, plan_, result, h_after):
    """{side: {"terrain", "source", "result", "contact": per frame}} of each heel, for the report's plot."""
    heights = {}
    for foot in feet:
        j = sampler.column[(foot.side, "heel")]
        heights[foot.side] = {"terrain": np.where(np.isfinite(h_after[:, j]), h_after[:, j], np.nan).tolist(),
                              "source": plan_.points[:, j, 2].tolist(), "result": result[:, j, 2].tolist(),
                              "contact": plan_.contacts[:, j].tolist()}
    return heights


def _source_floor(plan_, sampler):
    """The floor the source stood on, as the report says it: "terrain" (it stands on it already), else per foot
    the lowest and highest of its stances' floors."""
    if plan_.source_on_terrain:
        return "terrain"
    return {foot.side: [float(np.min(plan_.floors[on, k])), float(np.max(plan_.floors[on, k]))]
            for k, foot in enumerate(sampler.feet) if (on := plan_.contacts[:, sampler.cols[k]].any(axis=1)).any()}


@one_job_each_call
def foot_placement(scene, obj, options, progress=None):
    """Plant the feet of ``obj``'s action on the terrain objects; returns a FootReport. The source action is
    kept; the result is a new action with keys and contact channels."""
    import bpy

    started = time.perf_counter()
    bake_options = BakeOptions(options.frame_start, options.frame_end, options.step, method=options.method,
                               time_limit=options.time_limit, max_error=options.max_error,
                               max_angle=float("inf"), continuity=1e-4, rescue=4.0,
                               independent=options.independent, workers=options.workers)
    check_bake(obj, bake_options)
    check_feet_input(obj, options)
    objects = _terrain_objects(options.terrain)
    terrain = Terrain(objects, bpy.context.evaluated_depsgraph_get())
    feet = find_feet(obj, options.feet)
    frames = list(range(options.frame_start, options.frame_end + 1, options.step))
    before_frame = (scene.frame_current, scene.frame_subframe)
    source_action = obj.animation_data.action
    a0, a1 = source_action.frame_range
    if options.frame_end < a0 or options.frame_start > a1:
        raise RigError(f"frames {options.frame_start}-{options.frame_end} are outside the action "
                       f"{source_action.name!r} ({a0:g}-{a1:g})")
    outside = [f for f in frames if f < a0 or f > a1]
    # Toes that follow constraints (Rigify's: through a mechanism the solver does not model) are held as keyed:
    # rigid with their foot.
    stiff = {f.ball for f in feet if f.ball and driven_by_rig(obj, f.ball)}
    plan_, sampler, pelvis = plan(scene, obj, feet, terrain, frames, options, stiff)
    scene.frame_set(before_frame[0], subframe=before_frame[1])
    _check_plan(plan_, obj, frames, objects)
    controls = rig_controls(scene, obj, [f.ankle for f in feet] + [pelvis], frames, {f.ankle for f in feet})
    lost = [f.ankle for f in feet if driven_by_rig(obj, f.ankle) and f.ankle not in controls]
    if lost:
        raise RigError(f"{', '.join(lost)} follow constraints and no control bone that carries them was found (a "
                       "bone without constraints whose pose keeps one relation to the foot): keys on the feet would "
                       "be overridden (a Rigify rig animated in FK: switch its legs to IK); or give the feet of the "
                       "skeleton that is keyed with --feet, or bake the constraints first")
    goals = FootGoals(obj, feet, sampler, plan_, pelvis, options, controls)
    result = np.full_like(plan_.points, np.nan)
    result_rot = np.zeros_like(plan_.rotations)
    both = np.flatnonzero(plan_.contacts.any(axis=1))
    shots = set(both[np.linspace(0, len(both) - 1, min(4, len(both))).astype(int)].tolist()) if len(both) else set()
    segments = {}
    held = np.zeros((len(frames), len(options.held)))  # held bones' heads from their targets, as shown
    row = {f: i for i, f in enumerate(frames)}

    def read_result(f):  # (the result as Blender shows it, read as the bake judges its goals on it)
        i = row.get(f)
        if i is None:
            return
        result[i], result_rot[i] = sampler.sample(rotations=True)
        for k, (bone, targets) in enumerate(options.held.items()):
            held[i, k] = np.linalg.norm(np.array(obj.matrix_world @ obj.pose.bones[bone].head) - targets[i])
        if i in shots:
            W = np.array(obj.matrix_world)
            segments[f] = [((W @ np.append(np.array(pb.head), 1.0))[:3], (W @ np.append(np.array(pb.tail), 1.0))[:3])
                           for pb in obj.pose.bones if pb.bone.use_deform]

    baker = Baker(scene, obj, bake_options, goals=goals, watch=read_result)
    bake_report = baker.run(progress=progress)
    if np.isnan(result).any():  # (every frame is read as the bake's are judged)
        raise RuntimeError("foot placement: the bake did not show every frame of the result")
    action = obj.animation_data.action
    write_contacts(obj, action, obj.animation_data.action_slot, sampler, frames, plan_.contacts, plan_.untouched)
    scene.frame_set(before_frame[0], subframe=before_frame[1])
    before, _ = foot_metrics(plan_, plan_.points, plan_.rotations, terrain, sampler, heights=plan_.terrain)
    after, h_after = foot_metrics(plan_, result, result_rot, terrain, sampler)
    worst = max(max(a["penetration_mm_max"], a["float_mm_max"]) for a in after.values()) / 1e3
    ok = worst <= options.max_error and bake_report.ok and not plan_.untouched
    verdict = _verdict(worst, options, bake_report, plan_.untouched)
    heights = _heel_heights(feet, sampler, plan_, result, h_after)
    snapshots = side_views(plan_, terrain, segments)
    report = FootReport(obj.name, action.name, source_action.name if source_action else "", frames,
                        [f"{f.side} {f.ankle}" + (f"/{f.ball}" if f.ball else "") for f in feet], plan_.source_contacts,
                        before, after, bake_report.to_dict(), bool(ok), verdict, plan_.off_terrain,
                        time.perf_counter() - started, heights, plan_.warnings, snapshots,
                        (1e3 * float(held.mean()), 1e3 * float(held.max())) if held.size else None)
    report.source_floor = _source_floor(plan_, sampler)
    if outside:
        report.warnings.append(outside_warning(frames, (a0, a1), f"the action {source_action.name!r} spans",
                                               "foot placement"))
    keep_report(action, bake_report)
    action[FEET_REPORT_PROPERTY] = json.dumps(report.to_dict())
    return report


