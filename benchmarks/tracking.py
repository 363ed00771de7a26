# SPDX-License-Identifier: GPL-3.0-or-later
"""Character tracking (paper 003 §6.2 protocol): a CMU skeleton imported from each BVH follows its own wrist,
ankle and head positions; the hips are given (the clip's); every other bone starts from rest; bone IK
limits are derived from the clip's own range in Blender's parameters (swing ellipse and twist), so every
target is reachable inside limits. Blender's Standard and iTaSC solvers, driven by IK constraints on the
same chains (hips to effector), run on the same frames. Every frame and every 12th frame.

Reported: mean, p95 and max goal error (mm), limit violations, ms per frame, knee/elbow angular
acceleration (smoothness), and a PNG plot.

Units: the BVH files use CMU's length unit (1/0.45 inch = 0.056444 m, from the ASF files' `length 0.45`);
they are imported with that global scale, so errors are in metres.

    python -m fullbody_ik.benchmarks.tracking [--clips 02_01,...] [--max-frames N] [--method lm]
"""

import argparse
import os
import time

import numpy as np

from fullbody_ik.rig import build_tree, read_pose, write_pose
from fullbody_ik.rig.armature import bone_rotations, rotation_violations
from fullbody_ik.solvers import BoneJoint, Displacement, Position, Tracker, solve
from fullbody_ik.solvers.joints import bone_values

from .common import RESULTS, ROOT, prepare_compiled, table, write

CMU_UNIT = 0.0254 / 0.45  # metres per CMU length unit
EFFECTORS = {"LeftHand": "LeftForeArm", "RightHand": "RightForeArm", "LeftFoot": "LeftLeg",
             "RightFoot": "RightLeg", "Head": "Neck1"}  # effector (its head) -> the bone whose tail it is
SMOOTH_JOINTS = ["LeftLeg", "RightLeg", "LeftForeArm", "RightForeArm"]


def import_clip(bpy, path):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_anim.bvh(filepath=path, global_scale=CMU_UNIT, rotate_mode="NATIVE")
    obj = bpy.context.object
    start, end = (int(round(f)) for f in obj.animation_data.action.frame_range)
    return obj, start + 1, end  # frame `start` is the added T-pose


def record(bpy, obj, frames):
    """The clip's hips basis and effector world positions per frame; local bone rotations for limits."""
    hips, targets, local = [], [], []
    for f in frames:
        bpy.context.scene.frame_set(f)
        hips.append((tuple(obj.pose.bones["Hips"].location), obj.pose.bones["Hips"].rotation_quaternion.copy()
                     if obj.pose.bones["Hips"].rotation_mode == "QUATERNION"
                     else obj.pose.bones["Hips"].matrix_basis.to_quaternion()))
        targets.append([np.array(obj.matrix_world @ obj.pose.bones[e].head) for e in EFFECTORS])
        local.append({pb.name: np.array(pb.matrix_basis)[:3, :3] for pb in obj.pose.bones})
    return hips, np.array(targets), local


def derive_limits(obj, local, bones):
    """IK limits covering every rotation the clip gives these bones, in Blender's swing/twist parameters."""
    probe = BoneJoint("b", "p", "c", np.eye(4), limits={"x": (-1, 1), "y": (-1, 1), "z": (-1, 1)})
    for name in bones:
        vals = np.array([bone_values(probe, frame[name]) for frame in local])  # (sx, twist, sz)
        s = vals[:, [0, 2]]
        norm = np.linalg.norm(s, axis=1, keepdims=True)
        xz = np.where(norm > 1e-12, s / np.maximum(norm, 1e-12) * np.sin(0.5 * norm), 0.0)  # quaternion comps
        pb = obj.pose.bones[name]
        for k, axis in ((0, "x"), (1, "z")):
            # Half-axes sqrt(2) x the extremes: the per-quadrant ellipse then holds the whole box of samples.
            hi = min(1.0, np.sqrt(2.0) * max(xz[:, k].max(), 0.0) + 0.01)
            lo = min(1.0, np.sqrt(2.0) * max(-xz[:, k].min(), 0.0) + 0.01)
            setattr(pb, f"use_ik_limit_{axis}", True)
            setattr(pb, f"ik_min_{axis}", -2.0 * np.arcsin(lo))
            setattr(pb, f"ik_max_{axis}", 2.0 * np.arcsin(hi))
        pb.use_ik_limit_y = True
        pb.ik_min_y = max(-np.pi, min(vals[:, 1].min(), 0.0) - 0.02)
        pb.ik_max_y = min(np.pi, max(vals[:, 1].max(), 0.0) + 0.02)


def chain_bones(obj):
    out = set()
    for e in EFFECTORS:
        b = obj.data.bones[e].parent
        while b is not None and b.name != "Hips":
            out.add(b.name)
            b = b.parent
    return sorted(out)


def violations(tree, mapping, locals_):
    """How many bone rotations ({bone: 3x3}) fall outside the limits (our projection is Blender's clamp,
    tested)."""
    R = np.broadcast_to(np.eye(3), (1, len(tree.link_names), 3, 3)).copy()
    for name, rot in locals_.items():
        if name in mapping.joints:
            R[0, tree.link_index[name]] = rot
    return int(rotation_violations(tree, mapping, R)[0])


def angle_acceleration(series):
    """Mean |second difference| of each smoothness joint's rotation angle, rad/frame^2."""
    a = np.array([[np.arccos(np.clip((np.trace(f[j]) - 1) / 2, -1, 1)) for j in SMOOTH_JOINTS] for f in series])
    return float(np.mean(np.abs(np.diff(a, 2, axis=0)))) if len(a) > 2 else 0.0


def run_ours(bpy, obj, hips, targets, method, budget, starts=1, rest_weight=0.0):
    hb = obj.pose.bones["Hips"]
    hb.lock_ik_x = hb.lock_ik_y = hb.lock_ik_z = True
    tree, mapping = build_tree(obj, bones=list(EFFECTORS))  # hips at rest, locked: the tree's base
    rest_hips = np.array(obj.data.bones["Hips"].matrix_local)
    q = read_pose(obj, tree, mapping)
    tracker = Tracker(tree, method, budget)  # what a bake does: the first frame a full solve, then tracking
    errors, ms, viol, series = [], [], 0, []
    for (loc, rot), pts in zip(hips, targets):
        hb.location, hb.rotation_mode, hb.rotation_quaternion = loc, "QUATERNION", rot
        bpy.context.view_layer.update()
        # Targets in the tree's space: the hips' pose mapped back onto their rest frame.
        to_tree = rest_hips @ np.linalg.inv(np.array(hb.matrix)) @ np.linalg.inv(np.array(obj.matrix_world))
        local_pts = (to_tree @ np.c_[pts, np.ones(len(pts))].T).T[:, :3]
        goals = [Position(e, p) for e, p in zip(EFFECTORS, local_pts)]
        if rest_weight:  # a preference for the rest pose: keeps redundant chains from drifting into dead ends
            goals.append(Displacement(np.zeros(tree.n), weight=rest_weight))
        t0 = time.perf_counter()
        if starts == 1:
            res = tracker.step(goals, q)
        else:
            res = solve(tree, goals, q, method=method, time_limit=budget, rng=0, starts=starts)
        ms.append((time.perf_counter() - t0) * 1e3)
        q = res.q
        W = tree.fk(q)
        errors.append([np.linalg.norm(W[e][:3, 3] - p) for e, p in zip(EFFECTORS, local_pts)])
        rots = {name: R for name, (R, _) in bone_rotations(tree, mapping, q).items()
                if len(mapping.variables[name])}
        viol += violations(tree, mapping, rots)
        series.append({j: rots[j] for j in SMOOTH_JOINTS})
    write_pose(obj, tree, mapping, q)
    return np.array(errors), np.array(ms), viol, series


def run_blender(bpy, obj, hips, targets, solver):
    """Blender's IK constraints (Standard = LEGACY, or ITASC) on the same chains, same frames."""
    obj.pose.ik_solver = solver
    empties = []
    for effector, bone in EFFECTORS.items():
        e = bpy.data.objects.new(f"target {effector}", None)
        bpy.context.scene.collection.objects.link(e)
        c = obj.pose.bones[bone].constraints.new("IK")
        c.target = e
        n, b = 0, obj.data.bones[bone]
        while b is not None and b.name != "Hips":
            n, b = n + 1, b.parent
        c.chain_count = n
        empties.append(e)
    tree, mapping = build_tree(obj, bones=list(EFFECTORS))  # only to read limits in our terms
    rest = {b.name: np.array(b.matrix_local) for b in obj.data.bones}
    hb = obj.pose.bones["Hips"]
    errors, ms, viol, series = [], [], 0, []
    for (loc, rot), pts in zip(hips, targets):
        hb.location, hb.rotation_mode, hb.rotation_quaternion = loc, "QUATERNION", rot
        for e, p in zip(empties, pts):
            e.location = p
        t0 = time.perf_counter()
        bpy.context.view_layer.update()
        ms.append((time.perf_counter() - t0) * 1e3)
        M = np.array(obj.matrix_world)
        pose = {pb.name: np.array(pb.matrix) for pb in obj.pose.bones}
        errors.append([np.linalg.norm((M @ pose[e])[:3, 3] - p) for e, p in zip(EFFECTORS, pts)])
        rots = {}
        for name in mapping.bones:
            bone = obj.data.bones[name]
            if bone.parent is None:
                continue
            parent = pose[bone.parent.name] @ np.linalg.inv(rest[bone.parent.name]) @ rest[name]
            R = (np.linalg.inv(parent) @ pose[name])[:3, :3]
            rots[name] = R / np.linalg.norm(R, axis=0)
        viol += violations(tree, mapping, rots)
        series.append({j: rots[j] for j in SMOOTH_JOINTS})
    return np.array(errors), np.array(ms), viol, series


def summary(errors, ms, viol, series):
    mm = errors.ravel() * 1e3
    return {"mean_mm": float(mm.mean()), "p95_mm": float(np.percentile(mm, 95)), "max_mm": float(mm.max()),
            "violations": int(viol), "ms_per_frame": float(np.mean(ms)), "acceleration": angle_acceleration(series)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clips", default="02_01,02_03,02_04,03_01")
    ap.add_argument("--max-frames", type=int, default=0, help="limit frames per clip (0: all)")
    ap.add_argument("--method", default="lm")
    ap.add_argument("--budget-ms", type=float, default=10.0)
    ap.add_argument("--starts", type=int, default=1, help="lm: parallel searches per frame (1: from the "
                    "previous frame only)")
    args = ap.parse_args()
    prepare_compiled()
    import bpy

    rows, out, curves = [], {}, {}
    for clip in args.clips.split(","):
        path = os.path.join(ROOT, "data", "bvh", f"cmu_{clip}.bvh")
        for step in (1, 12):
            obj, first, last = import_clip(bpy, path)
            frames = list(range(first, last + 1, step))
            if args.max_frames:
                frames = frames[: args.max_frames]
            hips, targets, local = record(bpy, obj, frames)
            obj.animation_data.action = None  # every bone but the hips (set per frame) starts from rest
            for pb in obj.pose.bones:
                pb.rotation_mode, pb.rotation_quaternion, pb.location = "QUATERNION", (1, 0, 0, 0), (0, 0, 0)
            derive_limits(obj, local, chain_bones(obj))
            key = f"{clip} every {step}"
            out[key] = {}
            ours = run_ours(bpy, obj, hips, targets, args.method, args.budget_ms / 1e3, args.starts)
            out[key]["ours"] = summary(*ours)
            curves[key] = {"ours": ours[0].max(axis=1) * 1e3}
            for solver, label in (("LEGACY", "Blender Standard"), ("ITASC", "Blender iTaSC")):
                for pb in obj.pose.bones:
                    pb.rotation_quaternion, pb.location = (1, 0, 0, 0), (0, 0, 0)
                res = run_blender(bpy, obj, hips, targets, solver)
                out[key][label] = summary(*res)
                curves[key][label] = res[0].max(axis=1) * 1e3
                for pb in obj.pose.bones:  # remove the constraints for the next solver
                    for c in list(pb.constraints):
                        pb.constraints.remove(c)
            for label, s in out[key].items():
                rows.append([key, label, len(frames), f"{s['mean_mm']:.2f}", f"{s['p95_mm']:.2f}",
                             f"{s['max_mm']:.1f}", s["violations"], f"{s['ms_per_frame']:.2f}",
                             f"{s['acceleration']:.4f}"])
                print(rows[-1], flush=True)
    print(table(rows, ["clip", "solver", "frames", "mean mm", "p95 mm", "max mm", "violations", "ms/frame",
                       "knee/elbow accel"]))
    plot(curves)
    write("tracking", {"method": args.method, "budget_ms": args.budget_ms, "starts": args.starts, "results": out},
          f"python -m fullbody_ik.benchmarks.tracking --method {args.method} --starts {args.starts}")


def plot(curves):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in curves if k.endswith("every 1")] or list(curves)
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 2.6 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for label, err in curves[key].items():
            ax.plot(err, label=label, lw=1)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(f"CMU {key}: largest goal error per frame", fontsize=10)
        ax.set_ylabel("mm")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("frame")
    fig.tight_layout()
    path = os.path.join(RESULTS, "tracking.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
