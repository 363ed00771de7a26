# SPDX-License-Identifier: GPL-3.0-or-later
"""What foot placement did: each foot's penetration, float, clearance against the source's, sole angle and skate
at its contacts, before and after (foot_metrics), the verdict, the text and the plot of the report, and the
summary the panel shows of the report kept on an action."""

from dataclasses import dataclass, field

import numpy as np

from .bake_report import frame_ranges, summary_lines
from .contacts import runs
from .soles import plane_normal, sole_probes


FEET_REPORT_PROPERTY = "fullbody_ik_feet_report"


def foot_metrics(plan_, points, rotations, terrain, sampler, heights=None):
    """Per foot: penetration and float at contacts (mm; the foot's float and each point's over its place, both
    relative to the source's clearance over its floor; the sole's lowest point's clearance against the source's,
    95th percentile of the difference), sole-normal error (deg), skate (mm/frame), frames
    off the terrain, for sole points ``points`` (F, P, 3) and ankle rotations (F, feet, 3, 3), world (the
    source's, or the result's). The sole normal is the source's floor normal turned as the foot turned from
    the source (whatever the rig's rest pose calls flat), against the terrain's normal, on flat-foot frames.
    ``heights`` (F, P): the terrain under the points when already cast (the source's: plan_.terrain)."""
    F, P, _ = points.shape
    h = heights
    if h is None:
        start = points[..., 2] + 0.5 * max(float(np.median(plan_.pelvis[:, 2]) - plan_.floor), 0.1)
        h = np.full((F, P), np.nan)
        for i in range(F):
            h[i] = terrain.below(points[i], start[i] + np.maximum(plan_.terrain[i] - plan_.floor, 0.0))[0]
    out = {}
    names = [n for _, n, _, _ in sampler.specs]
    for k, foot in enumerate(sampler.feet):
        cols = sampler.cols[k]
        c = plan_.contacts[:, cols]
        gap = points[:, cols, 2] - h[:, cols]
        gap_rel = points[:, cols, 2] - (h[:, cols] + np.maximum(plan_.clearance[:, cols], 0.0))
        pen = np.where(c, np.maximum(-gap, 0.0), np.nan)
        # and between them, as the foot touches: a sole across a step edge (its heel below, its ball above) has
        # every point on a tread and its middle in the riser
        between = sole_probes([names[j] for j in cols])[len(cols):]
        touching = np.flatnonzero(c.any(axis=1))
        if len(between) and len(touching):
            Q = np.einsum("rp,fpk->frk", between, points[touching][:, cols])
            top = np.max(np.where(np.isfinite(h[touching][:, cols]), h[touching][:, cols], -np.inf), axis=1)
            lift = 0.5 * max(float(np.median(plan_.pelvis[:, 2]) - plan_.floor), 0.1)  # (rays from over the foot
            # and the highest ground under it)
            hq = terrain.below(Q.reshape(-1, 3), (np.maximum(Q[..., 2], top[:, None]) + lift).ravel())[0]
            hq = hq.reshape(Q.shape[:2])
            pen = np.concatenate([pen, np.full((F, len(between)), np.nan)], axis=1)
            pen[touching, len(cols):] = np.maximum(hq - Q[..., 2], 0.0)
        flo = np.where(c, np.maximum(gap_rel, 0.0), np.nan)  # each contact point over its place
        # The foot floats when it could come down: by its contact point nearest its place (a rigid foot under
        # which the terrain or the source's own sole is uneven has other points above theirs: point float).
        hover = np.min(np.where(c & np.isfinite(gap_rel), np.maximum(gap_rel, 0.0), np.inf), axis=1)
        hover[~np.isfinite(hover)] = np.nan
        # The sole's clearance as an outside judge measures it: its lowest point over the terrain under it, against
        # the source's lowest point over its floor (none under it: a mocap toe poking through its floor is no
        # clearance to keep), on the frames the foot touches.
        touch = c.any(axis=1) & np.isfinite(h[:, cols]).any(axis=1)
        lowest = np.nanmin(np.where(np.isfinite(h[:, cols]), gap, np.inf), axis=1)
        diff = np.abs(lowest - np.maximum(np.min(plan_.clearance[:, cols], axis=1), 0.0))[touch]
        sk = []
        for j in cols:
            for a, b in runs(plan_.contacts[:, j]):
                if b > a:
                    sk.append(np.linalg.norm(np.diff(points[a:b + 1, j, :2], axis=0), axis=1))
        skate = np.concatenate(sk) if sk else np.zeros(0)
        heel, bi = (cols[[names[j] for j in cols].index(n)] for n in ("heel", "ball_in"))
        flat = plan_.contacts[:, heel] & plan_.contacts[:, bi]
        # R_result R_source^T n, n the source floor's normal (up, or tilted as a capture's floor may be), or the
        # terrain's when the source stands on it; with contacts on the floor, R_result R_rest^T up (the rest pose's
        # sole is level).
        n0 = np.tile(plan_.floor_up if plan_.flat is None else [0.0, 0.0, 1.0], (F, 1))
        if plan_.source_on_terrain and plan_.flat is None:
            n0 = np.array([plane_normal(plan_.points[i, cols, :2], plan_.terrain[i, cols]) for i in range(F)])
        flat_k = (plan_.rotations if plan_.flat is None else plan_.flat)[:, k]
        sole = np.einsum("tij,tj->ti", rotations[:, k] @ np.swapaxes(flat_k, -1, -2), n0)
        tn = np.array([plane_normal(points[i, cols, :2], h[i, cols]) for i in range(F)])  # the plane under the sole
        ang = np.degrees(np.arccos(np.clip(np.sum(sole * tn, axis=1), -1, 1)))
        ang = np.where(flat & np.isfinite(h[:, cols]).all(axis=1), ang, np.nan)
        nanmax = lambda a: float(np.nanmax(a)) if np.isfinite(a).any() else 0.0  # noqa: E731
        nanmean = lambda a: float(np.nanmean(a)) if np.isfinite(a).any() else 0.0  # noqa: E731
        out[foot.side] = {
            "penetration_mm_max": 1e3 * nanmax(pen), "penetration_mm_mean": 1e3 * nanmean(pen),
            "float_mm_max": 1e3 * nanmax(hover), "float_mm_mean": 1e3 * nanmean(hover),
            "point_float_mm_max": 1e3 * nanmax(flo), "point_float_mm_mean": 1e3 * nanmean(flo),
            "clearance_diff_mm_p95": 1e3 * (float(np.percentile(diff, 95)) if diff.size else 0.0),
            "sole_normal_deg_max": nanmax(ang), "sole_normal_deg_mean": nanmean(ang),
            "skate_mm_per_frame": 1e3 * (float(skate.mean()) if skate.size else 0.0),
            "contact_frames": int(c.any(axis=1).sum()),
            "frames_off_terrain": int((~np.isfinite(h[:, cols])).any(axis=1).sum()),
        }
    return out, h


@dataclass
class FootReport:
    armature: str
    action: str
    source_action: str
    frames: list
    feet: list  # labels
    contacts_from: str
    before: dict
    after: dict
    bake: dict  # the bake's own report (goals, verdict as Blender shows it)
    ok: bool
    verdict: str
    off_terrain: list
    seconds: float
    heights: dict = field(default_factory=dict)  # for the plot
    warnings: list = field(default_factory=list)
    snapshots: dict = field(default_factory=dict)  # side views of the result at a few contact frames
    held_mm: tuple = None  # (mean, max) distance of the held bones from their targets, when some were held
    reference_frames: list = field(default_factory=list)  # frames left out of the default range: not the take's
    # What the source's clearances are measured over: {side: [lowest, highest]} world heights of the floor under
    # each foot as it stood (each stance where its lowest sole point stood), or "terrain" (the source stands on it)
    source_floor: object = None

    def to_dict(self):
        return {"armature": self.armature, "action": self.action, "source_action": self.source_action,
                "frames": [int(self.frames[0]), int(self.frames[-1])], "feet": self.feet,
                "contacts_from": self.contacts_from, "before": self.before, "after": self.after, "ok": self.ok,
                "verdict": self.verdict, "frames_off_terrain": self.off_terrain, "seconds": self.seconds,
                "warnings": self.warnings, "reference_frames": [int(f) for f in self.reference_frames],
                "source_floor": self.source_floor, "bake": self.bake}

    def text(self):
        lines = [f"Full-Body IK foot placement of {self.armature!r}: frames {self.frames[0]}-{self.frames[-1]}, "
                 f"feet {', '.join(self.feet)}, contacts {self.contacts_from}",
                 f"  action: {self.action!r}" + (f" (from {self.source_action!r}, kept)" if self.source_action
                                                 and self.source_action != self.action else ""),
                 f"  verdict: {'OK' if self.ok else 'FAILED'}, {self.verdict}"]
        for side in self.before:
            b, a = self.before[side], self.after[side]
            lines.append(f"  {side} foot ({a['contact_frames']} contact frames), before -> after:")
            for key, label in (("penetration_mm_max", "penetration max mm"), ("float_mm_max", "float max mm"),
                               ("point_float_mm_max", "a contact point over its place, max mm"),
                               ("clearance_diff_mm_p95", "lowest sole point's clearance vs the source's, p95 mm"),
                               ("sole_normal_deg_max", "sole normal max deg"),
                               ("skate_mm_per_frame", "skate mm/frame"),
                               ("frames_off_terrain", "frames with a sole point off the terrain")):
                lines.append(f"    {label}: {b[key]:.2f} -> {a[key]:.2f}")
        if self.source_floor == "terrain":
            lines.append("  measured: each contact point over the terrain under it (cast down), against its clearance "
                         "in the source over the same terrain (the source stands on it)")
        elif self.source_floor:
            levels = ", ".join(f"{side} {lo:.4f}" + (f"-{hi:.4f}" if hi - lo >= 5e-5 else "")
                               for side, (lo, hi) in self.source_floor.items())
            lines.append(f"  measured: each contact point over the terrain under it (cast down), against its clearance "
                         f"in the source over the floor under that foot: where its lowest sole point stood in each "
                         f"stance (heights {levels})")
        if self.off_terrain:
            lines.append(f"  frames where a foot has no terrain under any of its points (left as the source's): "
                         f"{len(self.off_terrain)} ({frame_ranges(self.off_terrain)})")
        lines += [f"  note: {w}" for w in self.warnings]
        return "\n".join(lines)

    def plot(self, path):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sides = list(self.heights)
        rows = len(sides) + (1 if self.snapshots else 0)
        fig, axes = plt.subplots(rows, 1, figsize=(9, 3 * rows), squeeze=False)
        for ax, side in zip(axes[:len(sides), 0], sides):
            d = self.heights[side]
            for a, b in runs(np.asarray(d["contact"])):
                ax.axvspan(self.frames[a], self.frames[b], color="0.85")
            ax.plot(self.frames, d["terrain"], "k-", lw=1, label="terrain under the heel")
            ax.plot(self.frames, d["source"], "--", lw=1, label="heel, source")
            ax.plot(self.frames, d["result"], "-", lw=1.2, label="heel, result")
            ax.set_ylabel(f"{side} height (m)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            ax.set_xlabel("frame")
        axes[0, 0].set_title(f"Foot placement of {self.armature}: heel height and the terrain under it, contacts "
                             "shaded",
                             fontsize=10)
        if self.snapshots:  # the character on the terrain, seen from the side, at a few contact frames
            ax = axes[-1, 0]
            s = self.snapshots
            ax.plot(s["profile_u"], s["profile_z"], "k-", lw=1)
            for frame, segments in zip(s["frames"], s["segments"]):
                for (u0, z0), (u1, z1) in segments:
                    ax.plot([u0, u1], [z0, z1], "-", lw=1.2, color="C0")
                ax.annotate(str(frame), (segments[0][0][0], max(z for seg in segments for _, z in seg)), fontsize=7)
            ax.set_aspect("equal")
            ax.set_xlabel("along the path (world units)")
            ax.set_ylabel("height")
            ax.set_title("the result on the terrain at contact frames (side view)", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def side_views(plan_, terrain, segments):
    """Bones (world segments per frame) and the terrain profile along the walk, projected on the vertical
    plane through the path: {frames, segments [(u, z) pairs], profile_u, profile_z}."""
    if not segments:
        return {}
    pelvis = plan_.pelvis
    start, end = pelvis[0, :2], pelvis[-1, :2]
    d = end - start
    d = d / np.linalg.norm(d) if np.linalg.norm(d) > 1e-6 else np.array([0.0, 1.0])
    u = lambda p: float((p[:2] - start) @ d)  # noqa: E731
    us = np.linspace(min(u(p) for p in pelvis) - 0.5, max(u(p) for p in pelvis) + 0.5, 200)
    line = np.array([[*(start + t * d), 0.0] for t in us])
    h, _, ok = terrain.below(line, np.full(len(line), float(np.nanmax(plan_.points[..., 2])) + 2.0))
    return {"frames": sorted(segments), "profile_u": us[ok].tolist(), "profile_z": h[ok].tolist(),
            "segments": [[((u(a), float(a[2])), (u(b), float(b[2]))) for a, b in segments[f]]
                         for f in sorted(segments)]}


def feet_report_summary(action):
    """Short lines about the foot placement report kept on an action (for the panel), or []."""
    return summary_lines(action, FEET_REPORT_PROPERTY, "foot placement", _describe_feet)


def _describe_feet(report):
    lines = [("OK: " if report["ok"] else "FAILED: ") + report["verdict"]]
    for side, a in report["after"].items():
        lines.append(f"{side.title()}: penetration {a['penetration_mm_max']:.1f} mm, float {a['float_mm_max']:.1f} mm,"
                     f" sole {a['sole_normal_deg_max']:.1f} deg")
    return lines
