# SPDX-License-Identifier: GPL-3.0-or-later
"""What a bake did, frame by frame: the BakeReport (goal errors as Blender shows the baked action, the verdict,
the text and plot a user reads), kept on the baked action as JSON and in the Text Editor, and the sidebar's short
lines about it."""

import json
from dataclasses import dataclass, field

import numpy as np

from .hints import counted

REPORT_PROPERTY = "fullbody_ik_report"  # JSON report kept on the baked action
REPORT_TEXT = "Full-Body IK bake report"  # and a readable one in the Text Editor


def frame_ranges(frames, most=None):
    """[3, 4, 5, 9, 11, 12] -> '3-5, 9, 11-12' ('-5 to -1' where a frame is negative); with ``most``, cut after
    that many ranges, the rest counted."""
    out, run = [], []

    def close():
        if run:
            out.append(f"{run[0]}" if len(run) == 1 else f"{run[0]} to {run[-1]}" if run[0] < 0 else
                       f"{run[0]}-{run[-1]}")

    for f in frames:
        if run and f == run[-1] + 1:
            run.append(f)
        else:
            close()
            run = [f]
    close()
    if most is not None and len(out) > most:
        return ", ".join(out[:most]) + f" and {len(out) - most} more"
    return ", ".join(out)


@dataclass
class BakeReport:
    armature: str
    method: str
    frames: list
    goals: list  # labels
    units: list  # "m" or "rad" per goal
    errors: np.ndarray  # (frames, goals) as Blender shows the baked action (world units, radians)
    success: np.ndarray  # (frames,)
    violations: np.ndarray  # (frames,) bones outside their limits as written
    solve_ms: np.ndarray  # (frames,)
    frame_ms: np.ndarray  # (frames,) evaluation + solve
    source_action: str = ""
    action: str = ""
    backup_action: str = ""
    bones: list = field(default_factory=list)
    keys: int = 0
    keys_before_thinning: int = 0
    seconds: float = 0.0
    warnings: list = field(default_factory=list)  # what of the rig the solve does not model
    max_error: float = 0.01  # world units
    max_angle: float = np.radians(1.0)
    solved_errors: np.ndarray = None  # (frames, goals) as the solver left them
    hints: list = field(default_factory=list)  # why goals were missed, where it can be told (reach_hints)
    notes: list = field(default_factory=list)  # what else the user should know (frames past the animation)
    turns: list = field(default_factory=list)  # [bone, degrees, frame]: each solved bone's largest turn from the
    # action's pose (in the armature's space), largest first
    off_chain: list = None  # [bone carrying them, degrees, frame]: the largest turn of the bones off every goal's
    # chain (they turn as the solved bone they hang from does)
    max_change: float = None  # degrees: off_chain past it fails the bake

    def shown_difference(self):
        """(largest length, largest angle) by which the pose Blender shows differs from the solved one."""
        if self.solved_errors is None or not len(self.units):
            return 0.0, 0.0
        d = np.abs(self.errors - self.solved_errors)
        lin = [i for i, u in enumerate(self.units) if u == "m"]
        ang = [i for i, u in enumerate(self.units) if u == "rad"]
        return (float(np.nanmax(d[:, lin], initial=0.0)) if lin else 0.0,
                float(np.nanmax(d[:, ang], initial=0.0)) if ang else 0.0)

    def missed(self):
        """(frames,) bools: a goal missed by more than max_error (lengths, world units) or max_angle."""
        limit = np.array([self.max_error if u == "m" else self.max_angle for u in self.units])
        if not len(limit):
            return np.zeros(len(self.frames), dtype=bool)
        return np.any(~(self.errors <= limit), axis=1)  # NaN errors count as missed

    def short_frames(self):
        """The frames on which the solve left a goal beyond its own tolerance (within the verdict's or not)."""
        return [int(f) for f, met in zip(self.frames, self.success) if not met]

    def short_text(self):
        """short_frames as ranges, cut after 12 of them ('2-8, 80-83, ... and 5 more')."""
        return frame_ranges(self.short_frames(), most=12)

    @property
    def ok(self):
        return not self.missed().any() and not self.changed_too_much()

    def changed_too_much(self):
        """Whether the bones off every goal's chain turned past max_change (when one is given)."""
        return self.max_change is not None and self.off_chain is not None and self.off_chain[1] > self.max_change

    def verdict(self):
        missed = self.missed()
        frames = [int(f) for f, m in zip(self.frames, missed) if m]
        text = ("every frame within "
                if not frames else f"{len(frames)} of {counted(len(self.frames), 'frame')} missed a goal by more than ")
        text += f"{self.max_error * 1e3:g} mm" if np.isfinite(self.max_error) else "any length"
        if np.isfinite(self.max_angle) or "rad" in self.units:  # no angle part when the goals have no angle
            text += " / " + (f"{np.degrees(self.max_angle):g} deg" if np.isfinite(self.max_angle) else "any angle")
        if frames:
            text += f" (frames {frame_ranges(frames)})"
        if self.changed_too_much():
            bone, deg, frame = self.off_chain
            text += (f"; the bones off the goals' chains turned {deg:.1f} deg from the action with {bone} (frame "
                     f"{frame}), more than {self.max_change:g} deg")
        return {"ok": self.ok, "max_error": _finite_or_none(self.max_error),
                "max_angle_deg": _finite_or_none(np.degrees(self.max_angle)), "missed_frames": frames,
                "short_frames": self.short_frames(),
                "text": text}

    def summary(self):
        linear = [i for i, u in enumerate(self.units) if u == "m"]
        angular = [i for i, u in enumerate(self.units) if u == "rad"]
        mm = self.errors[:, linear].ravel() * 1e3 if linear else np.zeros(0)
        deg = np.degrees(self.errors[:, angular].ravel()) if angular else np.zeros(0)
        n = len(self.frames)
        return {
            "frames": n,
            "solved_frames": int(np.sum(self.success)),
            "mean_error_mm": float(mm.mean()) if mm.size else None,
            "p95_error_mm": float(np.percentile(mm, 95)) if mm.size else None,
            "max_error_mm": float(mm.max()) if mm.size else None,
            "max_error_deg": float(deg.max()) if deg.size else None,
            "violations": int(np.sum(self.violations)),
            "ms_per_frame": float(np.mean(self.frame_ms)) if n else 0.0,
            "solve_ms_per_frame": float(np.mean(self.solve_ms)) if n else 0.0,
            "frames_per_second": n / self.seconds if self.seconds > 0 else None,
        }

    def to_dict(self):
        return {
            "armature": self.armature, "method": self.method, "source_action": self.source_action,
            "action": self.action, "backup_action": self.backup_action, "bones": self.bones, "keys": self.keys,
            "keys_before_thinning": self.keys_before_thinning, "seconds": self.seconds, "summary": self.summary(),
            "warnings": self.warnings, "notes": self.notes, "hints": self.hints, "ok": self.ok,
            "largest_turns": [{"bone": b, "deg": round(d, 3), "frame": f} for b, d, f in self.turns],
            "off_chain_turn": None if self.off_chain is None else
            {"with": self.off_chain[0], "deg": round(self.off_chain[1], 3), "frame": self.off_chain[2]},
            "verdict": self.verdict(),
            "goals": [{"label": g, "unit": u} for g, u in zip(self.goals, self.units)],
            "per_frame": {"frame": list(map(int, self.frames)), "errors": np.round(self.errors, 9).tolist(),
                          "solved_errors": None if self.solved_errors is None
                          else np.round(self.solved_errors, 9).tolist(),
                          "success": [bool(s) for s in self.success], "violations": self.violations.tolist(),
                          "solve_ms": np.round(self.solve_ms, 4).tolist(),
                          "frame_ms": np.round(self.frame_ms, 4).tolist()},
        }

    def text(self):
        s = self.summary()
        length, angle = self.shown_difference()
        differs = length > 1e-4 or angle > 1e-3
        shown = " as solved (Blender shows another pose: below)" if differs else ""  # (the verdict is the shown
        # pose's: 69/69 solved above "FAILED, 69 of 69 frames missed" read as a contradiction)
        lines = [f"Full-Body IK bake of {self.armature!r}: frames {self.frames[0]}-{self.frames[-1]} "
                 f"({counted(s['frames'], 'frame')}, method {self.method})",
                 f"  action: {self.action!r}" + (f" (from {self.source_action!r}, kept)" if self.source_action
                                                 and self.source_action != self.action else "")
                 + (f", backup {self.backup_action!r}" if self.backup_action else ""),
                 f"  bones keyed: {len(self.bones)}, keys: {self.keys}"
                 + (f" (thinned from {self.keys_before_thinning})" if self.keys != self.keys_before_thinning else ""),
                 f"  frames with every goal within its tolerance{shown}: {s['solved_frames']}/{s['frames']}"
                 + (f" (the others: {self.short_text()})"
                    if s['solved_frames'] < s['frames'] else ""),
                 f"  verdict: {'OK' if self.ok else 'FAILED'}, {self.verdict()['text']}",
                 f"  limit violations: {s['violations']}",
                 f"  time: {s['ms_per_frame']:.2f} ms per frame ({s['solve_ms_per_frame']:.2f} ms solving), "
                 f"{self.seconds:.2f} s in all"]
        if s["mean_error_mm"] is not None:
            lines.insert(5, f"  position error: mean {s['mean_error_mm']:.3f} mm, p95 {s['p95_error_mm']:.3f} mm, "
                            f"max {s['max_error_mm']:.3f} mm")
        if s["max_error_deg"] is not None:
            lines.insert(6, f"  angular error: max {s['max_error_deg']:.3f} deg")
        if self.turns:
            lines.append("  largest turns from the action: " + ", ".join(
                f"{b} {d:.1f} deg (frame {f})" for b, d, f in self.turns[:5]))
        lines += [f"  note: {n}" for n in self.notes]
        for i, (g, u) in enumerate(zip(self.goals, self.units)):
            e = self.errors[:, i] * (1e3 if u == "m" else 180 / np.pi)
            lines.append(f"    {g}: mean {e.mean():.3f}, max {e.max():.3f} {'mm' if u == 'm' else 'deg'}")
        if differs:
            lines.append(f"  the pose Blender shows differs from the solved one by up to {length * 1e3:.3f} mm, "
                         f"{np.degrees(angle):.3f} deg (errors above and the verdict are Blender's)")
        if self.hints:
            lines.append("  why goals were missed:" if not self.ok else "  why goals fell short of their tolerance:")
            lines += [f"    {h}" for h in self.hints]
        if self.warnings:
            lines.append("  what the solve does not model (the pose Blender shows may differ from the solved one):")
            lines += [f"    {w}" for w in self.warnings]
        return "\n".join(lines)

    def plot(self, path):
        """Per-frame goal errors, violations and time, as a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
        for i, (g, u) in enumerate(zip(self.goals, self.units)):
            axes[0].plot(self.frames, self.errors[:, i] * (1e3 if u == "m" else 180 / np.pi), lw=1,
                         label=f"{g} ({'mm' if u == 'm' else 'deg'})")
        axes[0].set_yscale("symlog", linthresh=0.1)
        axes[0].set_ylabel("goal error")
        axes[0].legend(fontsize=7, ncol=2)
        axes[0].set_title(f"Full-Body IK bake of {self.armature}: {counted(len(self.frames), 'frame')}, {self.method}",
                          fontsize=10)
        axes[1].step(self.frames, self.violations, where="mid")
        axes[1].set_ylabel("bones outside limits")
        axes[2].plot(self.frames, self.frame_ms, lw=1, label="frame (evaluate + solve)")
        axes[2].plot(self.frames, self.solve_ms, lw=1, label="solve")
        axes[2].set_ylabel("ms")
        axes[2].set_xlabel("frame")
        axes[2].legend(fontsize=7)
        for ax in axes:
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _finite_or_none(x):
    return float(x) if np.isfinite(x) else None


def keep_report(action, report):
    """The report as JSON on the baked action and as readable text in the Text Editor."""
    import bpy

    action[REPORT_PROPERTY] = json.dumps(report.to_dict())
    text = bpy.data.texts.get(REPORT_TEXT) or bpy.data.texts.new(REPORT_TEXT)
    text.clear()
    text.write(report.text() + "\n")


def summary_lines(action, prop, what, describe):
    """Short lines (``describe(report dict)``) about a JSON report kept on an action under ``prop``, for the
    sidebar; [] when it has none, one line saying so when it cannot be read."""
    text = action.get(prop) if action is not None else None
    if not text:
        return []
    try:
        return describe(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return [f"The {what} report on this action cannot be read"]


def report_summary(action):
    """Short lines about the bake report kept on an action (for the sidebar), or [] when it has none."""
    return summary_lines(action, REPORT_PROPERTY, "bake", _describe_bake)


def _describe_bake(report):
    s = report["summary"]
    lines = [f"Baked {counted(s['frames'], 'frame')}, {s['solved_frames']} with every goal met"]
    if "verdict" in report:
        lines.append(("OK: " if report["verdict"]["ok"] else "FAILED: ") + report["verdict"]["text"])
    lines += [f"Note: {n}" for n in report.get("notes", [])]
    if s.get("max_error_mm") is not None:
        lines.append(f"Position error: mean {s['mean_error_mm']:.2f} mm, max {s['max_error_mm']:.2f} mm")
    lines.append(f"Limit violations: {s['violations']}, {s['ms_per_frame']:.1f} ms per frame")
    return lines
