# SPDX-License-Identifier: GPL-3.0-or-later
"""The foot placement's plan: from the source motion, every frame's targets for the feet's sole points and the
pelvis (world). A foot that touches is the source foot moved as one rigid body, held against skate, turned to the
terrain under its sole and set on it with the source's clearance (slid onto one tread when it would land across a
step edge); a swinging foot is raised as a whole over the terrain under it (smoothed ahead in time, never below
the terrain: no toe through a step), blended into and out of its contacts; the pelvis rises or lowers by what the
lower foot needs, smoothed."""

from dataclasses import dataclass, field

import numpy as np

from ..solvers.rotations import exp_so3, log_so3, turn_between, unit
from .armature import RigError
from .contacts import CONTACT_HEIGHT, frames_to, moving, runs
from .knees import knee_limits
from .soles import plane_normal, sample_motion, sole_probes, untouched_feet
from .swing import carried, pitched, slope_limited, smoothstep, swing_lift, swing_pitch, swing_to
from .toes import HALF_LIFE, bend_track, joined, on_its_tip, rolled_onto_toes


@dataclass
class FootPlan:
    frames: list
    points: np.ndarray  # (F, P, 3) source sole points, world
    contacts: np.ndarray  # (F, P) bool
    terrain: np.ndarray  # (F, P) terrain height under the source points
    normals: np.ndarray  # (F, P, 3)
    hits: np.ndarray  # (F, P) bool
    targets: np.ndarray  # (F, P, 3) world
    pelvis: np.ndarray  # (F, 3) world target of the pelvis head
    floor: float  # the source floor height
    clearance: np.ndarray  # (F, P) source height above its floor
    source_contacts: str = "detected"  # or "the action's contact channels"
    off_terrain: list = field(default_factory=list)  # frames where a sole point has no terrain under it
    rotations: np.ndarray = None  # (F, feet, 3, 3) the source ankles' world rotations
    warnings: list = field(default_factory=list)
    ankles: np.ndarray = None  # (F, feet, 3) where each ankle's head goes: the foot's motion applied to the source's
    source_on_terrain: bool = False  # the source already stands on the terrain (a second run): its floor is it
    pelvis_rotation: np.ndarray = None  # (F, 3, 3) the source pelvis's rotation, armature space
    flat: np.ndarray = None  # (F, feet, 3, 3) with on_floor: the ankles' rest rotations (a level sole)
    untouched: list = field(default_factory=list)  # feet (sides) that carried the body with no contact detected
    floors: np.ndarray = None  # (F, feet) the floor under each foot in the source: where it stood in each stance
    knee_limits: dict = field(default_factory=dict)  # {shin: {axis: (min, max)}}: its knee bends back no further
    floor_up: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))  # the source floor's normal



def plan(scene, obj, feet, terrain, frames, options, stiff=frozenset()):
    """(FootPlan, the sole sampler, the pelvis's name): the source motion sampled and every frame's targets (world)
    for ``feet`` on ``terrain`` (options: FootOptions; ``stiff``: balls no control bends)."""
    m = sample_motion(scene, obj, feet, frames, options.step)
    sampler, pts, fps, floor, leg = m.sampler, m.pts, m.fps, m.floor, m.leg
    contacts = rolled_onto_toes(m.contacts, pts, sampler, feet, stiff) if options.on_floor else m.contacts
    # Each point over the floor under its foot: where the foot's lowest point stands in each stance (blended
    # between stances, never over the foot: detect_sole_contacts). A mocap floor drifts and a mocap skeleton's
    # two soles do not sit at one height (CMU's right some 2 cm over its left): each stance touches where it
    # stood. One level for the whole foot, so a rigid foot keeps its shape (a mocap skeleton's ball stands
    # higher than its toe tip; as the heel rises it keeps that height).
    clearance = pts[..., 2] - m.floors[:, [foot for foot, *_ in sampler.specs]]
    height, normal, hits, raw = _terrain_under(terrain, pts, floor, leg)
    over = pts[..., 2] - height
    on_terrain = _stands_on_terrain(over, pts, height, contacts, clearance, floor, leg)
    floor_up = np.array([0.0, 0.0, 1.0])
    if on_terrain:  # the terrain is its floor: clearances are over it and there is no offset to add
        clearance = np.where(np.isfinite(over), over, clearance)
        raw = np.zeros_like(raw)
    else:  # a tilted capture floor: each point over it, not over a level through where the foot stood
        floor_up = floor_normal(pts, contacts, m.floors, sampler.cols, leg, m.travel)
        clearance -= _tilt_under(pts, sampler.cols, floor_up)
    if options.on_floor:
        clearance = np.where(contacts, 0.0, clearance)
    swing_offset = _swing_offsets(raw, sampler.cols, fps)
    targets = pts.copy()
    targets[..., 2] += swing_offset
    # On a treadmill a standing foot slides back under the body at the belt's speed: it is pinned to the belt.
    ground = pts.copy()
    if m.treadmill:
        ground[..., :2] -= _belt(pts, contacts, fps)[:, None, :]
    for k, cols in enumerate(sampler.cols):
        _place_contacts(targets, m, k, cols, ground[:, cols], contacts[:, cols], raw, clearance, swing_offset,
                        terrain, feet, stiff, on_terrain, floor_up, options)
    for k, cols in enumerate(sampler.cols):
        if feet[k].side in options.swing_rise:
            swing_to(targets, pts, m.ankles[:, k], cols, [sampler.specs[j][2] == feet[k].ankle for j in cols],
                     contacts[:, cols].any(axis=1), options.swing_rise[feet[k].side], fps)
    for k, cols in enumerate(sampler.cols):
        _over_the_terrain(targets, m, k, cols, contacts[:, cols], raw, clearance, swing_offset, terrain, options)
    ease_pelvis = _eased_off_terrain(targets, pts, hits, sampler.cols, options, fps)
    _check_numbers(feet, sampler.cols, pts, targets)
    if options.on_floor:
        for k, cols in enumerate(sampler.cols):
            if feet[k].ball not in stiff:  # a toe nothing can bend (no control carries it) stays as it is
                bend_track(obj, sampler, feet[k], cols, targets, contacts, terrain, leg, fps)
    pelvis_target = m.pelvis.copy()
    pelvis_target[:, 2] += ease_pelvis * _pelvis_drop(targets, pts, contacts, swing_offset, sampler.cols, options, fps)
    warnings = []
    if m.treadmill:
        warnings.append(f"the pelvis moves {m.travel:.3f} (world units) over the frames: an action without root "
                        "motion (in place); a standing foot slides back under the body at the treadmill's speed (the "
                        "standing feet's median over a second), its height and turn following the terrain")
    off = [int(f) for f, w in zip(frames, ease_pelvis) if w == 0.0]  # a foot left as the source's
    ankles = m.ankles
    for k, foot in enumerate(feet):  # the ankle moved as the foot's sole points on it were (Kabsch, each frame)
        on = [j for j in sampler.cols[k] if sampler.specs[j][2] == foot.ankle]
        ankles[:, k] = carried(pts[:, on], targets[:, on], ankles[:, k])
    flat = None
    if options.on_floor:  # the rest pose stands flat on its floor (its sole points are level)
        W = np.array(obj.matrix_world)[:3, :3]
        rest = np.array([W @ np.array(obj.data.bones[f.ankle].matrix_local)[:3, :3] for f in feet])
        flat = np.broadcast_to(rest / np.linalg.norm(rest, axis=1, keepdims=True), m.rotations.shape)
    untouched = untouched_feet(m, [k for k, f in enumerate(feet) if k in m.detected_feet or
                                   f.side in options.detected_contacts])
    return FootPlan(frames, pts, contacts, height, normal, hits, targets, pelvis_target, floor, clearance, m.source,
                    off, m.rotations, warnings, ankles, on_terrain, m.pelvis_rotation, flat, untouched, m.floors,
                    knee_limits(m.knees, m.knee_bends), floor_up), \
        sampler, \
        m.pelvis_name


def floor_normal(pts, contacts, floors, cols, leg, travel, most_tilt=np.radians(10.0)):
    """The up normal of the floor the source stood on: the plane through its stances (each where its foot's points
    stood, at the level it stood on: ``floors`` (F, feet); each foot's soles at a height of their own) where they
    lie on one, within a contact's height, and the clip goes a leg's length (a mocap floor tilted in the capture's
    frame: CMU 02_01's stances rise 6 cm over its 4 m, 1 degree; a ramp); straight up for stances on steps or
    boxes, in place, or tilted past ``most_tilt``. ``pts`` (F, P, 3) the sole points, ``contacts`` (F, P), ``cols``
    the points of each foot."""
    up = np.array([0.0, 0.0, 1.0])
    if travel < leg:
        return up
    xy, z, foot = [], [], []
    for k, c in enumerate(cols):
        for a, b in runs(contacts[:, c].any(axis=1)):
            xy.append(np.median(pts[a:b + 1, c, :2].mean(axis=1), axis=0))
            z.append(float(np.median(floors[a:b + 1, k])))
            foot.append(k)
    feet = sorted(set(foot))
    if len(z) < len(feet) + 2:
        return up
    xy, z = np.array(xy), np.array(z)
    levels = (np.array(foot)[:, None] == np.array(feet)[None]).astype(float)  # (each foot's own level)
    # Each foot's stances spread along the way walked; across it, only as far as the path turns: a straight walk
    # tells the tilt along its way alone (across it, the feet's own levels are as good an answer), so that is all
    # that is fitted when one foot's stances spread less than a quarter of a leg across it.
    _, spread, axes = np.linalg.svd(xy - levels @ np.linalg.pinv(levels) @ xy, full_matrices=False)
    across = spread[1] / np.sqrt(len(z))
    A = np.column_stack([xy, levels]) if across > 0.25 * leg else np.column_stack([xy @ axes[0], levels])
    coef, *_ = np.linalg.lstsq(A, z, rcond=None)
    slope = coef[:2] if A.shape[1] == len(feet) + 2 else coef[0] * axes[0]
    if np.max(np.abs(z - A @ coef)) > CONTACT_HEIGHT * leg or np.arctan(np.linalg.norm(slope)) > most_tilt:
        return up
    return unit(np.array([-slope[0], -slope[1], 1.0]))


def _tilt_under(pts, cols, floor_up):
    """(F, P) how much higher the source floor ``floor_up`` stands under each sole point than under its foot's
    middle."""
    slope = -floor_up[:2] / floor_up[2]
    out = np.zeros(pts.shape[:2])
    for c in cols:
        out[:, c] = (pts[:, c, :2] - pts[:, c, :2].mean(axis=1, keepdims=True)) @ slope
    return out


def _terrain_under(terrain, pts, floor, leg):
    """(height, normal, hits, raw) of the terrain under each source point (F, P, 3): cast from above the point by
    half a leg plus where the terrain was the frame before (a character on a bridge deck stays on it, under an
    overhang stays under it); raw: its height over the source's floor, a frame with none under a point taking the
    nearest frame's."""
    F, P = pts.shape[:2]
    height = np.full((F, P), np.nan)
    normal = np.zeros((F, P, 3))
    hits = np.zeros((F, P), dtype=bool)
    first, first_ok = terrain.nearest(pts[0])  # the first frame: the surface nearest each point, above or below
    offset = np.where(first_ok, first - floor, 0.0)
    for i in range(F):
        start = pts[i, :, 2] + np.maximum(offset, 0.0) + 0.5 * leg
        h, n, ok = terrain.below(pts[i], start)
        height[i], normal[i], hits[i] = h, n, ok
        offset = np.where(ok, h - floor, offset)
    return height, normal, hits, _fill(np.where(hits, height - floor, np.nan))


def _stands_on_terrain(over, pts, height, contacts, clearance, floor, leg):
    """Whether the source already stands on this terrain (a second run, a clip made on it): told by its contacts
    (``over``: their height over the terrain), nearer the terrain than the floor, or following the terrain's ups
    and downs (a second run on stairs: its contacts on the first tread are as near the floor as the terrain), and
    as near it as to the ground under them (a clip on rocks over stairs may follow them by chance, some 10 cm
    off)."""
    seen = contacts & np.isfinite(over)
    if not seen.any():
        return False
    o, c, h = over[seen], (pts[..., 2] - floor)[seen], height[seen]  # over the clip's floor, not its ground
    nearer = np.median(np.abs(o)) < 0.5 * np.median(np.abs(c))
    follows = np.std(h) > 0.01 * leg and np.std(o) < 0.5 * np.std(c)
    stands = np.median(np.abs(o)) < np.median(np.abs(clearance[seen])) + 0.01 * leg
    return bool((nearer or follows) and stands)


def _swing_offsets(raw, feet_cols, fps):
    """(F, P) how far each point is raised as its foot swings: the terrain's height over the floor under it,
    smoothed ahead in time (a quarter of a second), never under it; a foot raised as a whole, by what its
    highest-needing point needs."""
    window = max(3, int(round(0.25 * fps)) | 1)
    swing_offset = np.maximum(moving(moving(raw, window, np.max), window, np.mean), raw)
    for cols in feet_cols:
        swing_offset[:, cols] = swing_offset[:, cols].max(axis=1, keepdims=True)
    return swing_offset


def _place_contacts(targets, m, k, cols, ground, touching, raw, clearance, swing_offset, terrain, feet, stiff,
                    on_terrain, floor_up, options):
    """Foot ``k``'s targets (its points' columns ``cols``) on the frames it touches (``touching`` (F, points)): the
    source foot held where it touched against skate (on ``ground``: its points, a treadmill's belt taken out),
    slid onto one level where it would stand across a step edge, turned as a whole from the source floor's normal
    to the terrain's under its contact points, about its middle, and raised until none of its contact points is
    closer to the terrain under it than the source's clearance. One rigid motion per frame: goals a foot can meet
    exactly (on a slope the heel-to-toe distance shortens: per-point heights alone would pull the foot apart),
    continuous as points touch and lift; blended into the swings around each contact."""
    shift = _skate_shift(ground, touching)  # (F, 2): pins the foot while it touches
    targets[:, cols, :2] += shift[:, None, :]
    _onto_one_level(targets, cols, touching, terrain, m.leg)
    specs = m.sampler.specs
    on_ankle = np.array([specs[j][2] in (feet[k].ankle, *(stiff & {feet[k].ball})) for j in cols])
    is_tip = np.array([specs[j][1] == "toe" for j in cols])
    prepared = _turned_to_terrain(targets, m.pts, cols, touching, raw, terrain, m.leg, on_terrain, floor_up)
    # With on_floor the foot is turned until the contact points on its ankle bone are level with the terrain
    # (the toe tip, on the toe bone, bends onto it below); what the contacts leave free (the turn about the
    # ball's line while only the ball touches, any turn on the heel alone) follows the neighbouring frames'.
    weights, tilts = {}, {}
    if options.on_floor:
        foot_length = float(np.median(np.linalg.norm(m.pts[:, cols[-1]] - m.pts[:, cols[0]], axis=-1)))  # heel to toe
        weights = {t: _level_weights(turned, h_all, ok_all, touching[t], on_ankle & ~is_tip, foot_length)
                   for t, (R, turned, h_all, ok_all) in prepared.items()}
        tilts = _level_track({t: (prepared[t][1], weights[t], prepared[t][2]) for t in prepared},
                             0.5 ** (1.0 / max(HALF_LIFE * m.fps, 1.0)))
    bends = feet[k].ball not in stiff and not on_ankle.all()  # a toe that bends (a bone of its own)
    turns = {}
    for t, (R, turned, h_all, ok_all) in prepared.items():
        c = touching[t]
        base = c & ok_all  # the points the foot rests on
        keep = np.maximum(clearance[t, cols], 0.0)  # ... over the terrain by this much
        if options.on_floor:
            middle = _pivot(turned, weights[t])
            turned = middle + (turned - middle) @ tilts[t].T
            R = tilts[t] @ R
            if (base & on_ankle).any():
                base = base & on_ankle
            elif feet[k].ball not in stiff and (ok_all & on_ankle).any() and not on_ankle.all():
                # on its toe tip alone, a toe that bends and whose copied tip curls under the ground (a mocap
                # toe curls as it leaves): the foot rests its lowest point on the ground, the toe bent up onto
                # it (bend_track); lifted whole to the tip, it jumped up the frame its ball left the ground
                lowest, tips = ok_all & on_ankle, c & ok_all & ~on_ankle
                lift = float(np.max(h_all[lowest] - turned[lowest, 2]))
                if np.all(turned[tips, 2] + lift < h_all[tips]):
                    base, keep = lowest, np.zeros_like(keep)
        # Its lifted points (a heel coming off, toes down at a heel strike) follow the same motion, above the
        # terrain; with on_floor a toe tip under it bends up onto it (after, bend_track).
        lifted = ~c & ok_all
        if options.on_floor:
            lifted &= on_ankle
        turned, R = _rested(turned, R, h_all, base, keep, lifted)
        if options.on_floor and not bends and c[is_tip].all() and not (c & ~is_tip).any():
            ankle = carried(m.pts[t, cols][None][:, on_ankle], turned[None][:, on_ankle], m.ankles[t, k][None])[0]
            turned, R = on_its_tip(turned, R, is_tip, h_all, ok_all, m.ankles[t, k, 2] + swing_offset[t, cols[0]],
                                    ankle)
        targets[t, cols] = turned
        turns[t] = R
    _blend_swings(targets, m.pts, cols, touching, turns, swing_offset, options.blend_frames)


def _turned_to_terrain(targets, pts, cols, touching, raw, terrain, leg, on_terrain, floor_up):
    """{t: (R, points (P, 3), terrain heights under them (P,), hit (P,))} for each frame a foot touches with
    terrain under a contact point: its targets at the source's heights turned by R from the source floor's normal
    ``floor_up`` to the terrain's under them (not steeper than 45 degrees: an edge, a wall), about their middle (a
    source on the terrain is turned to it already), and the terrain under the turned points (turning moves them
    sideways a little: on a bump that matters)."""
    up = np.array([0.0, 0.0, 1.0])
    prepared = {}
    for t in np.flatnonzero(touching.any(axis=1)):
        c = touching[t]
        foot_pts = targets[t, cols].copy()
        foot_pts[:, 2] = pts[t, cols, 2]
        h_all, _, ok_all = terrain.below(foot_pts, foot_pts[:, 2] + np.nanmax(raw[t, cols]) + 0.5 * leg)
        if not ok_all[c].any():
            continue
        normal_t = plane_normal(foot_pts[:, :2], h_all, ok_all)
        if normal_t[2] < np.cos(np.radians(45.0)):
            normal_t = up
        R = np.eye(3) if on_terrain else turn_between(floor_up, normal_t)
        middle = foot_pts.mean(axis=0)
        turned = middle + (foot_pts - middle) @ R.T
        h_all, _, ok_all = terrain.below(turned, turned[:, 2] + np.nanmax(raw[t, cols]) + 0.5 * leg)
        if not (c & ok_all).any():
            continue
        prepared[t] = (R, turned, h_all, ok_all)
    return prepared


def _level_weights(turned, h_all, ok_all, touch, sole, foot_length):
    """(P,) how much each point of a foot counts as it is levelled onto the terrain: its sole's points that touch
    (``touch``) with terrain under them (``ok_all``; ``sole``: on its ankle bone, no toe tip of a foot with no toe
    bone), a point the copied foot holds above the others (a heel already lifting: its leg could not reach) less,
    by nothing from a sixth of the foot's length up; the touching points alike where fewer than two count."""
    rigid = touch & ok_all & sole
    weights = rigid.astype(float)
    if rigid.any():
        rise = np.where(ok_all, turned[:, 2] - h_all, np.inf)  # a point off the terrain: no weight
        rise -= rise[rigid].min()
        weights *= np.clip((1.0 / 6.0 - rise / foot_length) / (1.0 / 6.0 - 1.0 / 20.0), 0.0, 1.0)
    if (weights > 0).sum() < 2:
        weights = (touch & ok_all).astype(float)
    return weights


def _rested(turned, R, h_all, base, keep, lifted):
    """(points, R) of a foot set on the terrain: raised until none of the points it rests on (``base``) is nearer
    the terrain under it (``h_all``) than ``keep``; a ``lifted`` point that would go under it turns the foot about
    its contact points (the turn, up to 1.5 times the least, that leaves the least to lift the whole foot by
    afterwards: a turn that lifts a toe may lower the heel under the terrain, a foot pitched on its ball), not
    lifting it whole (which would leave the contacts floating)."""
    up = np.array([0.0, 0.0, 1.0])
    rest_on = lambda: h_all[base] + keep[base] - turned[base, 2]  # noqa: E731
    turned = turned.copy()
    turned[:, 2] += float(np.max(rest_on()))  # no contact point below the surface (bumps lift the sole)
    under = h_all[lifted] - turned[lifted][:, 2]
    if len(under) and under.max() > 0.0:
        pivot = turned[base].mean(axis=0)
        p = turned[lifted][int(np.argmax(under))]
        arm = p - pivot
        reach = float(np.linalg.norm(arm[:2]))
        if reach > 1e-6:
            axis = np.cross(up, np.array([arm[0], arm[1], 0.0]) / reach)
            angle = float(np.arcsin(min(under.max() / reach, 1.0)))
            if (exp_so3(-angle * axis) @ arm)[2] < arm[2]:  # the sense that raises the points on p's side
                axis = -axis
            best, Rp = np.inf, np.eye(3)
            for a in np.linspace(0.0, min(1.5 * angle, 0.5 * np.pi), 31):
                Ra = exp_so3(-a * axis)
                moved = pivot + (turned - pivot) @ Ra.T
                lift_needed = max(0.0, float(np.max(h_all[lifted] - moved[lifted, 2])),
                                  float(np.max(h_all[base] + keep[base] -
                                               moved[base, 2])))
                if lift_needed < best - 1e-9:
                    best, Rp = lift_needed, Ra
            turned = pivot + (turned - pivot) @ Rp.T
            R = Rp @ R
        turned[:, 2] += float(np.max(np.concatenate([[0.0], h_all[lifted] - turned[lifted][:, 2], rest_on()])))
    return turned, R


def _blend_swings(targets, pts, cols, touching, turns, swing_offset, blend_frames):
    """A foot's swing blended into and out of each contact: the same rigid motion, a fraction of the contact's
    turn (``turns`` {t: R}) and of its height change, fading (smoothly) over ``blend_frames`` or a third of the
    swing, the longer."""
    F = len(targets)
    air_runs = runs(~touching.any(axis=1))
    for a, b in runs(touching.any(axis=1)):
        before = next((y - x + 1 for x, y in air_runs if y == a - 1), 0)
        after = next((y - x + 1 for x, y in air_runs if x == b + 1), 0)
        for side, edge, swing in ((-1, a, before), (1, b, after)):
            n = max(blend_frames, swing // 3)
            for d in range(1, n + 1):
                w = smoothstep(1.0 - d / (n + 1))
                t = edge + side * d
                if not (0 <= t < F) or touching[t].any() or edge not in turns:
                    continue
                P = targets[t, cols]
                middle = P.mean(axis=0)
                moved = middle + (P - middle) @ _fraction(turns[edge], w).T
                swing_edge = pts[edge, cols, 2] + swing_offset[edge, cols]
                moved[:, 2] += w * float(np.mean(targets[edge, cols, 2] - swing_edge))
                targets[t, cols] = moved


def _over_the_terrain(targets, m, k, cols, touching, raw, clearance, swing_offset, terrain, options):
    """Never below the terrain: foot ``k`` swinging keeps at least the source's clearance over the terrain right
    under each of its points (blending toward a contact on another step must not pull a toe through the step),
    probed at its points and along its sole between them (an edge under the middle of the foot), on the terrain
    under where they go (a foot slid onto one tread is not over the source's step). A toe or heel that would go
    under (a long foot pitched as the source's swings) turns the foot at the ankle first, the leg kept; what that
    cannot clear lifts the foot whole (a foot is rigid: per-point lifts would ask for goals it cannot meet), eased
    in and out (a step is not a pop), to nothing at contacts."""
    pts, leg, F = m.pts, m.leg, len(targets)
    air = np.flatnonzero(~touching.any(axis=1))
    if not len(air):
        return
    W = sole_probes([m.sampler.specs[j][1] for j in cols])  # (probes, points)
    above = np.nanmax(raw[air][:, cols], axis=1).repeat(W.shape[0])
    h_src = m.floor + np.einsum("qp,tp->tq", W, raw[air][:, cols]).ravel()  # else: the terrain under the source

    def probed():
        """The probes where the foot's targets put them (A, Q, 3), and the terrain's height under each."""
        T = np.einsum("qp,tpk->tqk", W, targets[air][:, cols])
        h, _, ok = terrain.below(T.reshape(-1, 3), T[..., 2].ravel() + 0.5 * leg + above)
        return T, np.where(ok, h, h_src).reshape(T.shape[:2])

    T, h_t = probed()
    keep = clearance[air][:, cols]
    if options.on_floor:  # a foot coming down onto the floor (or going up from it) with its contact may go
        # lower than the source's clearance: by as much as its swing was blended down
        drop = targets[air][:, cols, 2] - pts[air][:, cols, 2] - swing_offset[air][:, cols]
        keep = keep + np.minimum(drop.mean(axis=1, keepdims=True), 0.0)
    lowest = np.maximum(keep, 0.0).min(axis=1)  # the clearance the foot's lowest point keeps over the terrain
    at_ankle = m.ankles[air, k] + (targets[air][:, cols] - pts[air][:, cols]).mean(axis=1)
    pitch = swing_pitch(T, at_ankle, h_t, lowest, len(cols), air, targets[air][:, cols], m.fps)
    for i, t in enumerate(air):
        if pitch[i] != 0.0:
            targets[t, cols] = pitched(targets[t, cols], at_ankle[i], pitch[i])
    T, h_t = probed()  # (turned, a toe may stand over another tread: a box's edge)
    lift = swing_lift(T[..., 2], h_t, lowest, len(cols))
    slope = 0.02 * leg  # per frame
    for x, y in runs(np.isin(np.arange(F), air)):
        s = np.searchsorted(air, [x, y + 1])
        part = lift[s[0]:s[1]]
        lift[s[0]:s[1]] = np.maximum(moving(slope_limited(part, slope)[:, None], 3, np.mean)[:, 0], part)
    targets[air[:, None], np.array(cols)[None, :], 2] += lift[:, None]


def _eased_off_terrain(targets, pts, hits, feet_cols, options, fps):
    """(F,) how much the pelvis follows the plan: a foot with no terrain under any of its points (walked off the
    mesh) is left as the source's there, eased out of and back into its placement over a third of a second (its
    targets moved so); a foot partly over an edge stands on what is under it. The least of the feet's."""
    F = len(targets)
    n = max(options.blend_frames, int(round(0.3 * fps)), 1)
    ease = []
    for cols in feet_cols:
        off_terrain = ~hits[:, cols].any(axis=1)
        w = np.ones(F)
        if off_terrain.any():  # 0 off the terrain, easing to 1 over the n placed frames nearest it
            w = smoothstep(np.minimum(frames_to(off_terrain), n + 1) / (n + 1))
        ease.append(w)
        targets[:, cols] = pts[:, cols] + w[:, None, None] * (targets[:, cols] - pts[:, cols])
    return np.min(ease, axis=0)


def _pelvis_drop(targets, pts, contacts, swing_offset, feet_cols, options, fps):
    """(F,) how far the pelvis goes up (or down): the lower foot's swing offset (one per foot: raised whole) and,
    with on_floor, what brought the contacts onto the floor (each frame, by what the foot brought down most
    needed: a leg cannot reach further; between contacts from the nearest), each smoothed over
    ``pelvis_smoothing``."""
    F = len(targets)
    window = max(1, int(round(options.pelvis_smoothing * fps)))
    lower = np.min([swing_offset[:, cols[0]] for cols in feet_cols], axis=0)
    lower = moving(lower[:, None], window, np.mean)[:, 0]
    if options.on_floor and contacts.any():
        drop = np.where(contacts, targets[..., 2] - pts[..., 2] - swing_offset, np.nan)
        need = np.full(F, np.nan)
        for c in feet_cols:
            touching_any = contacts[:, c].any(axis=1)
            mean_drop = np.nanmean(np.where(contacts[:, c], drop[:, c], np.nan)[touching_any], axis=1)
            need[touching_any] = np.fmin(need[touching_any], mean_drop)
        need = _fill(need[:, None])[:, 0]
        lower += moving(need[:, None], window, np.mean)[:, 0]
    return lower


def _pivot(points, weights):
    """The weighted middle of points (P, 3) (weights (P,) >= 0, some above 0): what a foot is turned about."""
    return (weights[:, None] * points).sum(axis=0) / weights.sum()


def _tilt(points, weights, heights, prior):
    """The horizontal rotation vector w (2,) that, turning a rigid foot's points (P, 3) about their weighted
    middle, puts those of weight above 0 at one height over ``heights`` (P,), weighted least squares, least
    changed from ``prior`` (from a small turn's rise (w x r)_z = w_x r_y - w_y r_x of a point r from the middle:
    a line of points, across the ball, fixes only the turn about it; one point fixes nothing)."""
    w = np.array(prior, dtype=float)
    mask = weights > 0
    if mask.sum() < 2 or not (np.isfinite(points[mask]).all() and np.isfinite(heights[mask]).all()):
        return w  # (a point off the terrain has no height: judged as such elsewhere, not turned toward)
    sw = np.sqrt(weights[mask])
    r0 = points[mask] - _pivot(points, weights)
    for _ in range(4):
        r = r0 @ exp_so3(np.array([w[0], w[1], 0.0])).T
        gap = r[:, 2] - heights[mask]
        target = (weights[mask] * gap).sum() / weights[mask].sum()
        A, b = sw[:, None] * np.column_stack([r[:, 1], -r[:, 0]]), sw * (target - gap)
        if not (np.isfinite(A).all() and np.isfinite(b).all()):
            return np.array(prior, dtype=float)  # (a degenerate foot: no turn read from it)
        step, *_ = np.linalg.lstsq(A, b, rcond=0.1)
        w += step
        if np.hypot(*step) < 1e-7:
            break
    return w


def _level_track(frames, decay):
    """{t: rotation (3, 3)} for a foot's contact frames {t: (points, mask, heights)}: each frame's _tilt, what its
    contacts leave free taken from the frames before it and after it (decaying by ``decay`` per frame), so the
    foot turns smoothly as points touch and lift."""
    order = sorted(frames)
    passes = []
    for seq in (order, order[::-1]):
        w, s, t_prev, out = np.zeros(2), 0.0, None, {}
        for t in seq:
            fade = decay ** abs(t - t_prev) if t_prev is not None else 1.0
            w = _tilt(*frames[t], w * fade)
            s = 1.0 if (frames[t][1] > 0).sum() >= 2 else s * fade  # (how much this frame's contacts say)
            out[t] = (w, s)
            t_prev = t
        passes.append(out)
    return {t: exp_so3(np.append(_tilt(*frames[t], joined(*passes[0][t], *passes[1][t])), 0.0)) for t in order}


def _check_numbers(feet, feet_cols, pts, targets):
    """A RigError naming the foot whose sole points or targets are not numbers on some frame (a sole of no size in
    the armature's units), before any solve reads them."""
    for foot, cols in zip(feet, feet_cols):
        for what, values in (("sole points", pts[:, cols]), ("targets", targets[:, cols])):
            if not np.isfinite(values).all():
                raise RigError(f"the {foot.label}: its {what} are not numbers on some frames (its sole, from its "
                               "bones or its skin, may have no size in the armature's units): give the feet by hand "
                               "(--feet ANKLE:BALL,ANKLE:BALL)")


def _onto_one_level(targets, cols, touching, terrain, leg):
    """A foot that would stand across a step edge at some frame of a contact (its points over surfaces more
    than 2 cm apart: as it lands, or as it turns about its toe) is slid along its length, by the least
    distance, onto one level for its whole contact (blended in and out): a rigid foot across an edge would rest
    on the edge with its heel or toe in the air."""
    F = len(targets)
    for a, b in runs(touching.any(axis=1)):
        ts = np.unique(np.r_[a:b + 1:3, b])  # every third frame of the contact and its last
        forward = targets[a, cols[-1], :2] - targets[a, cols[0], :2]  # heel to toe
        length = np.linalg.norm(forward)
        if length < 1e-6:
            continue
        forward /= length
        # The foot's points and two probes, ahead of the toe and behind the heel: a toe that pushes off against
        # a riser would have to rise the step's height in one frame as it leaves.
        P = targets[ts][:, cols]
        ahead, behind = P[:, -1].copy(), P[:, 0].copy()
        ahead[:, :2] += 0.3 * length * forward
        behind[:, :2] -= 0.15 * length * forward
        P0 = np.concatenate([P, ahead[:, None], behind[:, None]], axis=1).reshape(-1, 3)
        start = P0[:, 2] + 0.5 * leg + 1.0

        # heights as a quadratic of each point's place along the foot, as at the contact's first frame (a standing
        # foot's points keep their places along it)
        first = P0[:P0.shape[0] // len(ts), :2]
        fit = np.vander((first - first[0]) @ forward, 3)

        def spread(d, smooth=False):
            """The largest height range under the foot at a frame (``smooth``: the largest departure from a
            quadratic along it, which a bumpy ground's curve meets and a step edge does not), slid by d."""
            Q = P0.copy()
            Q[:, :2] += d * forward
            hq, _, okq = terrain.below(Q, start)
            if not okq.all():
                return np.inf
            H = hq.reshape(len(ts), -1)
            if not smooth:
                return float(np.ptp(H, axis=1).max())
            return float(np.abs(fit @ np.linalg.lstsq(fit, H.T, rcond=None)[0] - H.T).max())

        if spread(0.0) < 0.02:
            continue
        reach = np.arange(1, int(120 * length) + 1) * 0.01  # centimetre steps up to 1.2 foot lengths either way
        steps = np.ravel(np.column_stack([reach, -reach]))
        best = next((d for d in steps if spread(d) < 0.01), None)
        if best is None and spread(0.0, True) >= 0.01:  # no level spot near (a bumpy ground), and the foot
            # across an edge there (its heights far from a curve): the nearest spot where they follow one
            best = next((d for d in steps if spread(d, True) < 0.005), None)
        if best is None:
            continue
        move = np.zeros(3)
        move[:2] = best * forward
        targets[a:b + 1, cols] += move
        # Faded in over the whole swing before the contact and out over the one after it (smoothly: a slide is
        # several centimetres), from and to the neighbouring contacts, or held to the clip's ends.
        air = ~touching.any(axis=1)
        before = a - 1
        while before >= 0 and air[before]:
            before -= 1
        after = b + 1
        while after < F and air[after]:
            after += 1
        for t in range(before + 1, a):
            w = 1.0 if before < 0 else smoothstep((t - before) / (a - before))
            targets[t, cols] += w * move
        for t in range(b + 1, after):
            w = 1.0 if after >= F else smoothstep((after - t) / (after - b))
            targets[t, cols] += w * move


def _fraction(R, w):
    """The rotation by fraction w of R's angle, about its axis."""
    return exp_so3(w * log_so3(R))


def _belt(points, contacts, fps):
    """(F, 2) how far a treadmill's ground has carried what stands on it by each frame, from the first: each
    frame's step the median of the standing points' (``points`` (F, P, 3) touching on it and the frame before,
    ``contacts`` (F, P)) over a second around it, so both feet's stances set it; a frame with none takes the
    nearest frame's."""
    F = len(points)
    moved = np.diff(points[..., :2], axis=0)  # (F-1, P, 2): frame t-1 to t
    standing = contacts[1:] & contacts[:-1]
    half = max(1, int(round(0.5 * fps)))
    step = np.full((F, 2), np.nan)
    for t in range(1, F):
        lo, hi = max(0, t - 1 - half), min(F - 1, t + half)
        seen = moved[lo:hi][standing[lo:hi]]
        if len(seen):
            step[t] = np.median(seen, axis=0)
    step = _fill(step)
    step[0] = 0.0
    return np.cumsum(step, axis=0)


def _skate_shift(points, touching):
    """(F, 2) horizontal shift that holds a foot where it touched: from each contact's first frame, the shift
    cancels the horizontal motion of the point that has touched longest (the heel, then the ball as the heel
    lifts: the shift stays continuous); over a swing it returns smoothly from the last contact's shift to
    zero at the next contact (held after the last contact)."""
    F = len(points)
    shift = np.zeros((F, 2))
    on_any = touching.any(axis=1)
    for a, b in runs(on_any):
        anchor = None
        for t in range(a + 1, b + 1):
            both = touching[t] & touching[t - 1]
            if anchor is None or not both[anchor]:
                candidates = np.flatnonzero(both)
                anchor = int(candidates[0]) if len(candidates) else None
            step = points[t, anchor, :2] - points[t - 1, anchor, :2] if anchor is not None else 0.0
            shift[t] = shift[t - 1] - step
    for a, b in runs(~on_any):
        if a == 0:
            continue  # before the first contact: the source's own
        if b + 1 >= F:
            shift[a:] = shift[a - 1]
            continue
        n = b - a + 2
        shift[a:b + 1] = shift[a - 1] * (1.0 - smoothstep(np.arange(1, n) / n))[:, None]
    return shift


def _fill(values):
    """NaNs (no terrain) replaced by the nearest value in time, per column (0 where a column has none)."""
    out = values.copy()
    for j in range(out.shape[1]):
        col = out[:, j]
        ok = ~np.isnan(col)
        if not ok.any():
            out[:, j] = 0.0
            continue
        idx = np.arange(len(col))
        out[:, j] = np.interp(idx, idx[ok], col[ok])
    return out

