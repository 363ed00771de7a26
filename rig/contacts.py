# SPDX-License-Identifier: GPL-3.0-or-later
"""Contacts of the feet with their floor: found from the sole points' heights and speeds (with hysteresis, a
minimum duration, a floor of each stance's own where the capture's drifts), or read from the contact channels a
user keyed or edited on the action; and written back as those channels."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


CONTACT_PREFIX = "fbik_contact"
CONTACT_HEIGHT = 0.03  # of the hip height: a slow sole point lower than this over where it rests touches


def contact_channel(foot, point):
    """The custom property keyed with a sole point's contacts (the ball's sides share the ball's)."""
    return f"{CONTACT_PREFIX}_{foot.side}_{'ball' if point.startswith('ball') else point}"


def runs(mask):
    """[(first, last)] index runs of True in a 1-D bool array."""
    out, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        if not m and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(mask) - 1))
    return out


def shortest_contact(fps):
    """The fewest frames a contact lasts (a twelfth of a second, at least two): a shorter run is noise."""
    return max(2, int(round(0.08 * fps)))


def frames_to(mask):
    """(F,) how many frames each frame is from the nearest True of ``mask`` (F,) bool (0 on it; inf if none)."""
    t = np.arange(len(mask), dtype=float)
    before = np.maximum.accumulate(np.where(mask, t, -np.inf))  # the nearest at or before each frame
    after = np.minimum.accumulate(np.where(mask, t, np.inf)[::-1])[::-1]  # ... at or after
    return np.minimum(t - before, after - t)


def stance_levels(z, touching):
    """(F,) the level a point (an ankle, a foot's lowest point) stands at: each stance's low height (10th percentile:
    the heel down), joined linearly from one stance's end to the next one's start (a mocap floor drifts from step
    to step, ground rises and falls), held before the first and after the last. ``z`` (F,); ``touching`` (F,)
    bool: the foot's contacts (at least one). A run of contacts standing higher than the stances on both sides of
    it (by a fifth of the rise over the lowest: a foot touching on its toe tip alone, its ankle high) is no
    stance."""
    runs_ = [(a, b, float(np.percentile(z[a:b + 1], 10))) for a, b in runs(touching)]
    near = 0.2 * max(float(np.max(z)) - min(level for *_, level in runs_), 1e-12)
    stances = [r for k, r in enumerate(runs_)
               if not r[2] > max(n[2] for n in runs_[max(k - 1, 0):k + 2] if n is not r) + near] \
        if len(runs_) > 1 else runs_
    knots = [(t, level) for a, b, level in stances for t in (a, b)]
    return np.interp(np.arange(len(z)), [t for t, _ in knots], [level for _, level in knots])


def rise_over_stances(z, touching):
    """(F,) heights ``z`` of a point (an ankle) over where it stands (stance_levels)."""
    return z - stance_levels(z, touching)


def detect_contacts(height, speed, h_on, v_on, min_frames, pts=None):
    """(F, P) contacts from heights above the floor and speeds: on below h_on and v_on, off above 1.5x
    either (hysteresis), runs shorter than ``min_frames`` dropped; with the points ``pts`` (F, P, 3), gaps
    shorter than that filled where the point stays below 1.5x h_on and comes back to within h_on of where it
    left (mocap noise, not a step or a slide)."""
    F, P = height.shape
    out = np.zeros((F, P), dtype=bool)
    v_on = np.broadcast_to(np.asarray(v_on, dtype=float), (P,))  # per point, or one for all
    for p in range(P):
        on = False
        for t in range(F):
            if not on and height[t, p] < h_on and speed[t, p] < v_on[p]:
                on = True
            elif on and (height[t, p] > 1.5 * h_on or speed[t, p] > 1.5 * v_on[p]):
                on = False
            out[t, p] = on
        for a, b in runs(out[:, p]):
            if b - a + 1 < min_frames:
                out[a:b + 1, p] = False
        if pts is None:
            continue
        spans = runs(out[:, p])
        for (_, b), (a, _) in zip(spans, spans[1:]):
            if a - b - 1 < min_frames and (height[b + 1:a, p] < 1.5 * h_on).all() and \
                    np.linalg.norm(pts[a, p] - pts[b, p]) < h_on:
                out[b + 1:a, p] = True
    return out


def _own_floor(z):
    """(P,) each sole point's own lowest height (2nd percentile) over frames of heights ``z`` (F, P): mocap
    soles are not at one height; a foot's floor is the lowest of its points'."""
    return np.percentile(z, 2, axis=0)


def detect_sole_contacts(pts, speed, cols, leg, fps, in_place, level_cols=None):
    """((F, P) contacts, (F, feet) floor heights under the feet, (feet,) whether each foot stood still while
    another swung) of sole points ``pts`` (F, P, 3, world) with speeds (F, P): below 3 % of the hip height
    ``leg`` over the floor where the point rests and slower than 15 % of it per second (a foot in stance), with
    hysteresis and a minimum duration. ``cols``: the points' columns per foot; ``level_cols``: those of them
    that say where the foot stands (default all: not points guessed beside the bones, a sole's width).

    The floor where a point rests is its own lowest height (mocap soles are not at one height), or on uneven
    ground (a clip recorded on rocks or stairs) the low height (5th percentile; the first quartile where that is
    much higher: a toe poked through the floor as it leaves) of the foot's lowest point over a stance (a run of
    frames where a point of the foot is slow) on the floor the feet walk on (_on_drifting_floor), or that
    carries the body: another foot swings meanwhile (the weight is on this one: a step up onto a rock or a box)
    and it lasts at least half as long as the clip's stances do (not the feet slowing together at a jump's top),
    or it is no higher than where another foot stands (both feet on the top tread); not a raised foot held still
    while the other stands.
    The speed threshold grows with the feet's swing speed (a fifth of the calmer foot's 90th percentile, up to
    30 % of the hip height per second): a clip at its own 120 Hz, where mocap jitter moves a standing foot,
    reads like one slowed to a 24 fps scene; a jittering foot does not raise it. In place, the speed given is
    vertical and the threshold at least 1.5x its slowest fifth (a stylized run whose feet never stop). The
    floor under a foot is where it stands (in a stance whose lowest point drifts, that low height over the
    half second around each frame: a mocap floor drifts), blended linearly between its stances, never above the
    foot."""
    F, P = speed.shape
    z = pts[..., 2]
    h_on, min_frames = CONTACT_HEIGHT * leg, shortest_contact(fps)
    if in_place:
        v_on = np.maximum(0.15 * leg, 1.5 * np.percentile(speed, 20, axis=0))
    else:
        swing = min(float(np.median(np.percentile(speed[:, c], 90, axis=0))) for c in cols)
        v_on = np.full(P, max(0.15 * leg, min(0.2 * swing, 0.3 * leg)))
    own = _own_floor(z)
    ground = np.tile(own, (F, 1))  # per frame and point: the floor it is judged against
    slow = speed < v_on
    swinging = np.array([~slow[:, c].any(axis=1) for c in cols]).T  # (F, feet): no point of the foot is slow
    stances, local = _stances(z, slow, cols, level_cols, own, h_on, min_frames, fps)
    stances = _on_drifting_floor(stances, h_on, int(round(2.0 * fps)))
    standing, stood = _standing(stances, swinging, F, min_frames)
    floors = np.full((F, len(cols)), np.nan)  # the floor under each foot: where it stands, in between blended
    for k, a, b, stop, low, base in stances:
        c = cols[k]
        if np.isfinite(standing[a, k]):
            level = standing[a, k]
        else:
            beside = np.delete(standing[a:b + 1], k, axis=1).min(axis=1, initial=np.inf)  # where another stands
            level = low if int((np.isfinite(beside) & (low <= beside + h_on)).sum()) >= min_frames else np.inf
        floor = level  # (each stance on its own level: a mocap sole is not at one height over its floor)
        ground[a:stop, c] = floor + own[c] - own[c].min()
        floors[a:b + 1, k] = floor + local[a:b + 1, k] - low if np.isfinite(floor) else floor
    height = np.where(np.isfinite(ground), z - ground, np.inf)  # no floor: a foot held in the air
    t = np.arange(F)
    for k, c in enumerate(cols):  # between its stances a foot's floor goes from one to the next
        known = np.isfinite(floors[:, k])
        floors[:, k] = np.interp(t, t[known], floors[known, k]) if known.any() else own[c].min()
        floors[:, k] = np.minimum(floors[:, k], z[:, c].min(axis=1))  # never over the foot (a step down at the end)
    return detect_contacts(height, speed, h_on, v_on, min_frames, pts), floors, stood


def _stances(z, slow, cols, level_cols, own, h_on, min_frames, fps):
    """([(foot, first, last, stop: where the next stance begins, floor, on its own lowest floor)], local (F,
    feet)): the feet's stances, runs where a point of the foot is ``slow`` (the toe stays while the heel rises),
    joined over fewer than ``min_frames`` fast frames; the foot's floor in each the low height of its lowest point
    (a toe poked through the floor as it leaves: no level), or in a stance whose level drifts (mocap) the same
    low height over the half second around each frame (``local``: where each foot's lowest point stands, near
    each frame of a stance)."""
    F = len(z)
    stances = []
    local = np.full((F, len(cols)), np.nan)
    half = max(1, int(round(0.25 * fps)))
    for k, c in enumerate(cols):
        merged = []
        for a, b in runs(slow[:, c].any(axis=1)):
            if merged and a - merged[-1][1] - 1 < min_frames:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        lowest = z[:, (level_cols or cols)[k]].min(axis=1)
        for n, (a, b) in enumerate(merged):
            low, most = np.percentile(lowest[a:b + 1], [5, 25])
            low = float(most if most - low > h_on else low)
            local[a:b + 1, k] = low
            if np.percentile(lowest[a:b + 1], 75) - low > 0.5 * h_on:
                near = sliding_window_view(np.pad(lowest[a:b + 1], half, constant_values=np.nan), 2 * half + 1)
                near_low, near_most = np.nanpercentile(near, [5, 25], axis=1)
                local[a:b + 1, k] = np.where(near_most - near_low > h_on, near_most, near_low)
            stop = merged[n + 1][0] if n + 1 < len(merged) else F
            stances.append((k, a, b, stop, low, low - own[c].min() < h_on))
    return stances, local


def _standing(stances, swinging, F, min_frames):
    """((F, feet) the floor each foot stands on where that is sure, else inf; (feet,) whether each foot stood still
    while another swung): above its lowest floor, a stance holds the body when another foot swings meanwhile (the
    weight is on this one) and it lasts at least half as long as the clip's stances do (not the feet slowing
    together at a jump's top: that is shorter than a stance); not a raised foot held still."""
    standing = np.full((F, swinging.shape[1]), np.inf)
    stood = np.zeros(swinging.shape[1], dtype=bool)
    lengths = [b - a + 1 for _, a, b, _, _, base in stances if base and b - a + 1 >= min_frames] or \
        [b - a + 1 for _, a, b, _, _, _ in stances if b - a + 1 >= min_frames]
    typical = float(np.median(lengths)) if lengths else 0.0  # a stance's length in this clip (on the floor)
    for k, a, b, _, low, base in stances:
        others = np.delete(swinging, k, axis=1)
        carries = others.size > 0 and int(others[a:b + 1].any(axis=1).sum()) >= min_frames
        stood[k] |= carries and b - a + 1 >= min_frames
        if base or (carries and b - a + 1 >= 0.5 * typical):
            standing[a:b + 1, k] = low
    return standing, stood


def _on_drifting_floor(stances, h_on, window):
    """``stances`` (foot, first, last, stop, level, on the floor) with those on the floor the feet walk on: within
    ``h_on`` of the clip's lowest floor, or of a stance on it near in time (overlapping it or within ``window``
    frames, or each foot's nearest before or after it). A mocap floor drifts (CMU 131's soles stand 6 cm higher at the end of the take
    than at its start): a stance is on the floor where its neighbours stand, not only where the take began. A
    foot held raised while the other stands, or a step up onto a box, is further than that from its neighbours."""
    on = [s[5] for s in stances]
    changed = True
    while changed:
        changed = False
        for i, (_, a, b, _, low, _) in enumerate(stances):
            if on[i]:
                continue
            near = [j for j in range(len(stances)) if on[j] and max(stances[j][1] - b, a - stances[j][2]) <= window]
            for foot in {s[0] for s in stances}:
                floor = [j for j in range(len(stances)) if on[j] and stances[j][0] == foot]
                near.append(max((j for j in floor if stances[j][2] < a), key=lambda j: stances[j][2], default=None))
                near.append(min((j for j in floor if stances[j][1] > b), key=lambda j: stances[j][1], default=None))
            if any(abs(low - stances[j][4]) < h_on for j in near if j is not None):
                on[i] = changed = True
    return [s[:5] + (o,) for s, o in zip(stances, on)]


def moving(values, window, fn):
    """fn (np.max or np.mean) over a centred window of ``window`` frames, per column."""
    h = max(int(window) // 2, 0)
    out = np.empty_like(values)
    for t in range(len(values)):
        out[t] = fn(values[max(0, t - h):t + h + 1], axis=0)
    return out


def read_contacts(obj, sampler, frames):
    """((F, P) contacts from the armature's contact channels (keyed custom properties), (P,) which points have
    a channel), or None when none has."""
    ad = obj.animation_data
    if ad is None or ad.action is None:
        return None
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot) if ad.action_slot else None
    if bag is None:
        return None
    out = np.zeros((len(frames), len(sampler.specs)), dtype=bool)
    keyed = np.zeros(len(sampler.specs), dtype=bool)
    for j, (k, name, _, _) in enumerate(sampler.specs):
        fc = bag.fcurves.find(f'["{contact_channel(sampler.feet[k], name)}"]')
        if fc is None:
            continue
        keyed[j] = True
        out[:, j] = [fc.evaluate(f) > 0.5 for f in frames]
    return (out, keyed) if keyed.any() else None


def write_contacts(obj, action, slot, sampler, frames, contacts, skip=()):
    """Key the contacts (one channel per foot and sole point, constant interpolation) into ``action``: seen and
    edited in the Dope Sheet and Graph Editor; a later run uses the edited ones. Feet whose side is in ``skip``
    (the detector missed them) get no channel, so a later run detects them again rather than read "never"."""
    from bpy_extras import anim_utils

    bag = anim_utils.action_ensure_channelbag_for_slot(action, slot)
    done = set()
    for j, (k, name, _, _) in enumerate(sampler.specs):
        prop = contact_channel(sampler.feet[k], name)
        if prop in done:
            continue
        done.add(prop)
        path = f'["{prop}"]'
        fc = bag.fcurves.find(path)
        if fc is not None:
            bag.fcurves.remove(fc)
        if sampler.feet[k].side in skip:
            continue
        obj[prop] = 0.0
        fc = bag.fcurves.new(path, group_name="Full-Body IK contacts")
        fc.keyframe_points.add(len(frames))
        co = np.empty(2 * len(frames), dtype=np.float32)  # (Blender's own type: float64 is written 3x slower)
        co[0::2], co[1::2] = frames, contacts[:, j]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", [0] * len(frames))  # CONSTANT
        fc.update()
