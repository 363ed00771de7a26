# SPDX-License-Identifier: GPL-3.0-or-later
"""Keys in bulk on an F-curve, optionally thinned to those the curve needs to stay within a tolerance."""

import numpy as np


def simplify(frames, values, tol):
    """Ramer-Douglas-Peucker on a polyline: mask of the points to keep so that linear interpolation
    between kept points is within ``tol`` of every value (ends kept)."""
    n = len(frames)
    keep = np.zeros(n, dtype=bool)
    keep[[0, n - 1]] = True
    stack = [(0, n - 1)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        t = (frames[a + 1:b] - frames[a]) / (frames[b] - frames[a])
        line = values[a] + t * (values[b] - values[a])
        err = np.abs(values[a + 1:b] - line)
        k = int(np.argmax(err))
        if err[k] > tol:
            m = a + 1 + k
            keep[m] = True
            stack += [(a, m), (m, b)]
    return keep


def _replace_range(fc, frames, values):
    """Remove the curve's keys inside [frames[0], frames[-1]] and add these, in bulk."""
    points = fc.keyframe_points
    n = len(points)
    if n:
        co = np.zeros(2 * n, dtype=np.float32)  # (Blender's own type: float64 buffers are read and written 3x slower)
        points.foreach_get("co", co)
        x = co[0::2]
        inside = np.flatnonzero((x >= frames[0] - 1e-6) & (x <= frames[-1] + 1e-6))
        if len(inside) == n:
            points.clear()
        else:
            for i in inside[::-1]:
                points.remove(points[int(i)], fast=True)
    n0 = len(points)
    points.add(len(frames))
    co = np.zeros(2 * len(points), dtype=np.float32)
    points.foreach_get("co", co)
    co[2 * n0::2] = frames
    co[2 * n0 + 1::2] = values
    points.foreach_set("co", co)
    fc.update()  # sorts the keys and recomputes their handles


def write_keys(fc, frames, values, thin=0.0):
    """Key ``values`` at ``frames`` on the F-curve (keys already inside the range are replaced). With
    ``thin`` > 0, only the keys needed for the curve, as Blender evaluates it, to stay within ``thin`` of
    every value. Returns the number of keys written."""
    values = np.asarray(values, dtype=float)
    if thin <= 0 or len(frames) < 3:
        _replace_range(fc, frames, values)
        return len(frames)
    keep = simplify(frames, values, thin)
    for _ in range(20):
        _replace_range(fc, frames[keep], values[keep])
        err = np.abs(np.array([fc.evaluate(f) for f in frames]) - values)
        bad = err > thin
        if not bad.any():
            break
        # Bezier handles bend the curve between kept keys: add the worst frame of every gap that is off.
        gap = np.cumsum(keep)
        for g in np.unique(gap[bad]):
            in_gap = np.flatnonzero((gap == g) & bad)
            keep[in_gap[np.argmax(err[in_gap])]] = True
    else:
        keep[:] = True
        _replace_range(fc, frames, values)
    return int(keep.sum())
