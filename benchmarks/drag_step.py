# SPDX-License-Identifier: GPL-3.0-or-later
"""Drag step on Rigify's human metarig (body bones) with six goals: both hands and feet (poses), the head
looking at a point, the hips held near their pose; a hand target dragged along a path in the view plane.
Median time per step (solve + writing the pose), success within the budget, per method; ``lm-numpy`` is LM with
the compiled core switched off (the numpy reference), in the same run. A step whose goals a 1 s solve with
restarts cannot meet either is out of reach: success and p95 are also given over the steps in reach.

    python -m fullbody_ik.benchmarks.drag_step [--steps N] [--budget-ms 16] [--methods lm,lm-numpy,...]
"""

import argparse
import time

import numpy as np

from .common import prepare_compiled, table, write

GOALS = [("hand.L", "POSE"), ("hand.R", "POSE"), ("foot.L", "POSE"), ("foot.R", "POSE"),
         ("spine.006", "LOOK_AT"), ("spine", "POSITION")]
HEADERS = ["method", "variables", "median ms", "p95 ms", "all goals met", "steps in reach", "met in reach",
           "p95 ms in reach", "largest joint jump (rad)", "median jump"]


def _reachable(obj, session, q):
    """Whether a step's goals can be met at all: a solve of 1 s with restarts from the step's answer (not timed;
    part of the loop leaves the hands' poses out of reach with the feet and hips held)."""
    from fullbody_ik.rig.goals import goal_objectives
    from fullbody_ik.solvers import solve

    objectives = goal_objectives(obj, obj.fullbody_ik.goals, session.tree, session.mapping, session.start_q)
    return bool(solve(session.tree, objectives, q, "lm", time_limit=1.0, restarts=True, rng=0).success)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--budget-ms", type=float, default=16.0)
    ap.add_argument("--methods", default="lm,lm-numpy,memetic,memetic+lm,nullspace")
    args = ap.parse_args()
    import bpy

    import fullbody_ik
    from fullbody_ik.rig import read_pose
    from fullbody_ik.rig.drag import DragSession, look_at_perspective, to_screen
    from fullbody_ik.solvers import compiled

    prepare_compiled()
    rows, out = [], {}
    for method in args.methods.split(","):
        compiled.set_enabled(not method.endswith("-numpy"))
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.preferences.addon_enable(module="rigify")
        fullbody_ik.register()
        bpy.ops.object.armature_human_metarig_add()
        obj = bpy.context.object
        bpy.ops.object.mode_set(mode="POSE")
        for bone, kind in GOALS:
            obj.data.bones.active = obj.data.bones[bone]
            bpy.ops.fullbody_ik.goal_add(kind=kind)
        head = obj.fullbody_ik.goals[4]
        head.target.location = np.array(head.target.location) + np.array([0.0, -2.0, 0.0])
        s = obj.fullbody_ik.settings
        s.method, s.time_limit = method.split("+")[0].removesuffix("-numpy"), args.budget_ms / 1e3
        if method == "memetic+lm":  # the memetic solver with LM exploitation (the Exploitation setting)
            s.exploit = "LM"
        P, size = look_at_perspective((0.0, -4.0, 1.2), (0.0, 0.0, 1.0)), (1200, 800)
        start = np.array(obj.fullbody_ik.goals[0].target.matrix_world.translation)
        mouse = to_screen(P, size, start)[:2]
        session = DragSession(obj, P, size, mouse)
        times, ok, jumps, reachable = [], [], [], []
        previous = read_pose(obj, session.tree, session.mapping)
        for k in range(args.steps):  # a loop 60 px wide, 40 px high
            a = 2 * np.pi * k / args.steps
            t0 = time.perf_counter()
            res = session.move(mouse + np.array([60.0 * np.sin(a), 40.0 * (1 - np.cos(a))]))
            times.append(time.perf_counter() - t0)
            ok.append(res.success)
            reachable.append(res.success or _reachable(obj, session, res.q))
            jumps.append(float(np.max(np.abs(res.q - previous))))  # the largest joint change of the step
            previous = res.q
        session.confirm()
        times, ok, reachable = np.array(times) * 1e3, np.array(ok), np.array(reachable)
        within = times[reachable] if reachable.any() else times
        out[method] = {"median_ms": float(np.median(times)), "p95_ms": float(np.percentile(times, 95)),
                       "success_rate": float(ok.mean()), "variables": session.tree.n,
                       "reachable_steps": int(reachable.sum()), "met_where_reachable": float(ok[reachable].mean()),
                       "p95_ms_where_reachable": float(np.percentile(within, 95)),
                       "max_jump_rad": float(np.max(jumps)), "median_jump_rad": float(np.median(jumps)),
                       "bones_solved": len(session.mapping.bones)}
        rows.append([method, session.tree.n, f"{np.median(times):.1f}", f"{np.percentile(times, 95):.1f}",
                     f"{100 * ok.mean():.0f} %", f"{reachable.sum()}/{len(reachable)}",
                     f"{100 * ok[reachable].mean():.0f} %", f"{np.percentile(within, 95):.1f}",
                     f"{np.max(jumps):.2f}", f"{np.median(jumps):.3f}"])
        fullbody_ik.unregister()
    compiled.set_enabled(True)
    print(f"Drag step, Rigify human metarig, six goals, {args.steps} steps, budget {args.budget_ms:.0f} ms")
    print(table(rows, HEADERS))
    write("drag_step", {"budget_ms": args.budget_ms, "steps": args.steps, "results": out},
          f"python -m fullbody_ik.benchmarks.drag_step --steps {args.steps} --budget-ms {args.budget_ms:g}")


if __name__ == "__main__":
    main()
