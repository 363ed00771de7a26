# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint descriptions (plain data) and their vectorized models.

A joint moves its child link relative to the joint frame ``parent_world @ origin`` by a motion
``M(q) = [R(q) | t(q)]``. Each *model* handles every joint of one kind at once, over a batch of
configurations: motion ``(P, m, 4, 4)``, motion generators for Jacobians, projection onto the
feasible set, and random feasible samples.

Bone joints keep Blender's meaning of bone IK settings (``intern/iksolver``): the pose rotation is
``R = Swing(x, z) @ Twist(y)``; twist is limited to [ik_min_y, ik_max_y]; the swing quaternion
(w >= 0) has components (sin-half-angle) ``x in [sin(min_x/2), sin(max_x/2)]`` and likewise z,
and with both limited an ellipse per quadrant bounds (x, z), clamped radially as Blender does.
"""

from dataclasses import dataclass, field

import numpy as np

from .rotations import axis_rotation, exp_so3, left_jacobian_so3, log_so3

TWO_PI = 2.0 * np.pi


@dataclass
class Joint:
    """A scalar or fixed joint: kind in {'revolute', 'continuous', 'prismatic', 'fixed'}."""

    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    axis: tuple = (1.0, 0.0, 0.0)
    lower: float = -np.inf
    upper: float = np.inf
    mimic: tuple = None  # URDF <mimic>: (joint it follows, multiplier, offset); the tree refuses or frees it
    problem: str = None  # what makes a URDF joint unusable (a type we cannot solve, planar; limits crossed): held
    # fixed, refused when in the tree


@dataclass
class BoneJoint:
    """A Blender bone: rotation about its head with Blender's IK settings.

    ``lock`` is (lock_ik_x, lock_ik_y, lock_ik_z); ``limits`` maps 'x'/'y'/'z' to (min, max) in radians
    for the axes with use_ik_limit_*; ``stiffness`` is (ik_stiffness_x, _y, _z) in [0, 0.99].

    ``stretch`` is Blender's ik_stretch in [0, 1]: above 0 the bone gets one more variable, its scale s
    (Blender's IK stretch scales the bone uniformly: its tail and the heads of its children move to s times
    their offsets; the children's frames keep their own scale). Its IK weight is ik_stretch^2 (Blender:
    stiffness 1 - ik_stretch^2) and s stays within [0.001 / length, ...] (Blender: a bone no shorter than
    0.001), unbounded above. ``length`` is the bone's rest length.
    """

    name: str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    lock: tuple = (False, False, False)
    limits: dict = field(default_factory=dict)
    stiffness: tuple = (0.0, 0.0, 0.0)
    stretch: float = 0.0
    length: float = 1.0


STRETCH_MIN_LENGTH = 0.001  # Blender: IK stretch keeps a bone at least this long


@dataclass
class FreeJoint:
    """A free root: translation (x, y, z) then rotation (rotation vector), six variables."""

    name: str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))


def wrap_angle(a):
    return (np.asarray(a) + np.pi) % TWO_PI - np.pi


def wrap_rotation_vector(v):
    """Same rotation, norm <= pi: keeps the exponential map away from its singularity at 2 pi."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    # A hair above pi is left alone: at exactly pi both signs are the same rotation, and flipping one a
    # rounding error past it would hand a swing limit the other sign (the projection must be idempotent).
    over = n > np.pi + 1e-9
    if not np.any(over):
        return v
    safe = np.where(over, n, 1.0)
    return np.where(over, v * (wrap_angle(safe) / safe), v)  # angle t -> t - 2 pi k, same axis line


# ---------------------------------------------------------------------------------------------
# Swing limits in Blender's parameters


def _swing_quaternion_xz(s):
    """Swing exponential coordinates (..., 2) = (sx, sz) -> swing quaternion components (x, z), w >= 0."""
    theta = np.linalg.norm(s, axis=-1, keepdims=True)
    small = theta < 1e-9
    k = np.where(small, 0.5, np.sin(0.5 * theta) / np.where(small, 1.0, theta))
    return s * k


def _swing_from_quaternion_xz(xz):
    r = np.linalg.norm(xz, axis=-1, keepdims=True)
    small = r < 1e-12
    rr = np.clip(r, 0.0, 1.0)
    k = np.where(small, 2.0, 2.0 * np.arcsin(rr) / np.where(small, 1.0, r))
    return xz * k


def _nearest_on_ellipse(x, z, a, b, iterations=20):
    """Nearest point of the ellipse (x/a)^2 + (z/b)^2 = 1 to outside points (x, z) in the first quadrant
    (x, z >= 0): p = (a^2 x / (t + a^2), b^2 z / (t + b^2)) with t >= 0 the root of
    F(t) = (a x / (t + a^2))^2 + (b z / (t + b^2))^2 - 1: Newton from t = 0 (F > 0 outside; F is convex and
    decreasing, so the iterates climb monotonically to the root)."""
    a2, b2 = a * a, b * b
    t = np.zeros(np.broadcast(x, a).shape)
    for _ in range(iterations):
        u, v = a * x / (t + a2), b * z / (t + b2)
        F = u * u + v * v - 1.0
        dF = -2.0 * (u * u / (t + a2) + v * v / (t + b2))
        t = np.maximum(t - F / np.where(dF < 0.0, dF, -1.0), 0.0)
    return a2 * x / (t + a2), b2 * z / (t + b2)


def swing_clamp(xz, lo, hi, limited, nearest=False):
    """Blender's swing limit in quaternion components, vectorized (EllipseClamp of IK_Math.h).

    xz (..., m, 2); lo, hi (m, 2) = sin(min/2), sin(max/2); limited (m, 2) bools for (x, z).
    Both limited: each quadrant is bounded by the ellipse with half-axes from that side's limits;
    Blender moves outside points radially onto it, ``nearest`` moves them to the nearest point of it
    (the same feasible set; the radial move of a long thin ellipse can throw away most of a step, which
    stalls the solvers). One limited: a plain range on that component.
    """
    x, z = xz[..., 0], xz[..., 1]
    lo_x, lo_z, hi_x, hi_z = lo[:, 0], lo[:, 1], hi[:, 0], hi[:, 1]
    both = limited[:, 0] & limited[:, 1]
    xlim = np.where(x < 0.0, -lo_x, hi_x)
    zlim = np.where(z < 0.0, -lo_z, hi_z)
    degenerate = (xlim <= 1e-12) | (zlim <= 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (x / np.where(degenerate, 1.0, xlim)) ** 2 + (z / np.where(degenerate, 1.0, zlim)) ** 2
        outside = both & ~degenerate & (rho > 1.0)
        scale = np.where(outside, 1.0 / np.sqrt(rho), 1.0)
    if nearest and np.any(outside):
        safe_a, safe_b = np.where(degenerate, 1.0, xlim), np.where(degenerate, 1.0, zlim)
        px, pz = _nearest_on_ellipse(np.abs(x), np.abs(z), safe_a, safe_b)
        x = np.where(outside, np.sign(x) * px, x)
        z = np.where(outside, np.sign(z) * pz, z)
        scale = np.ones_like(scale)
    # Then a box on each limited component: the one-axis range, and for both the degenerate quadrant
    # (a zero half-axis) and limits not containing 0, as Blender does.
    x_new = np.where(limited[:, 0], np.clip(x * scale, lo_x, hi_x), x)
    z_new = np.where(limited[:, 1], np.clip(z * scale, lo_z, hi_z), z)
    return np.stack([x_new, z_new], axis=-1)


# ---------------------------------------------------------------------------------------------
# Models. Each is built from a list of (frame index, first variable index, joint description).


def index_run(idx):
    """A slice equal to the index array idx when it is a run of consecutive integers (indexing with it gives
    a view, not a copy), else idx itself."""
    idx = np.asarray(idx, dtype=int)
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return slice(int(idx[0]), int(idx[0]) + len(idx))
    return idx


class _Model:
    nvar = 0
    needs_pre = True  # generators need the joint frame parent_world @ origin

    def coupled(self):
        """Variables whose box bounds must not be clipped one by one (project() handles them)."""
        return np.zeros(0, dtype=int)

    def _identity(self, P):
        M = np.zeros((P, len(self), 4, 4))
        M[..., 0, 0] = M[..., 1, 1] = M[..., 2, 2] = M[..., 3, 3] = 1.0
        return M

    def local(self, Q, origin, out):
        """Write origin @ M(q) of this model's links into out (P, L, 4, 4)."""
        out[:, self.frames] = origin[self.frames] @ self.motion(Q)

    def __init__(self, entries):
        self.frames = np.array([e[0] for e in entries], dtype=int)
        self.vars = np.array([[e[1] + k for k in range(self.nvar)] for e in entries], dtype=int).reshape(
            len(entries), self.nvar
        )
        self.joints = [e[2] for e in entries]
        # Views instead of gathers where the indices are a run (serial chains): the hot paths index with these.
        self.at_frames = index_run(self.frames)
        self.at_vars = index_run(self.vars[:, 0]) if self.nvar == 1 else None

    def __len__(self):
        return len(self.frames)


class ScalarModel(_Model):
    """Revolute, continuous and prismatic joints: one variable about/along a fixed unit axis."""

    nvar = 1

    def __init__(self, entries):
        super().__init__(entries)
        axes = np.array([j.axis for j in self.joints], dtype=float).reshape(-1, 3)
        norms = np.linalg.norm(axes, axis=1, keepdims=True)
        if np.any(norms < 1e-12):
            bad = [j.name for j, n in zip(self.joints, norms[:, 0]) if n < 1e-12]
            raise ValueError(f"joint axis has zero length: {', '.join(bad)}")
        self.axes = axes / norms
        inverted = [j.name for j in self.joints if j.kind in ("revolute", "prismatic") and j.lower > j.upper]
        if inverted:
            raise ValueError(f"joint lower limit above upper limit: {', '.join(inverted)}")
        self.prismatic = np.array([j.kind == "prismatic" for j in self.joints])
        self.any_prismatic = bool(self.prismatic.any())
        self._basis = None
        self.continuous = np.array([j.kind == "continuous" for j in self.joints])
        # Revolute joints whose range spans a full turn or more: every angle has an equal one (k 2 pi away) inside
        # the range, so a value past a bound is wrapped into the range, not clipped (the same link pose; measured
        # on ur5, whose joints span +-2 pi: clipped, 46 % of LM searches from a random seed met the goal, wrapped,
        # 87 %).
        self.full_turn = np.array([j.kind == "revolute" and np.isfinite(j.lower) and np.isfinite(j.upper)
                                   and j.upper - j.lower >= 2.0 * np.pi - 1e-9 for j in self.joints], dtype=bool)
        self.turn_range = np.array([(j.lower, j.upper) for j, f in zip(self.joints, self.full_turn) if f],
                                   dtype=float).reshape(-1, 2)
        from .rotations import skew

        K = skew(self.axes)
        self.K, self.K2 = K, K @ K

    def motion(self, Q):
        q = Q[:, self.vars[:, 0]]  # (P, m)
        M = self._identity(Q.shape[0])
        M[..., :3, :3] += np.sin(q)[..., None, None] * self.K + (1.0 - np.cos(q))[..., None, None] * self.K2
        if self.any_prismatic:
            M[:, self.prismatic, :3, :3] = np.eye(3)
            M[..., :3, 3] = np.where(self.prismatic[:, None], q[..., None] * self.axes, 0.0)
        return M

    def local(self, Q, origin, out):
        """origin @ M(q) is linear in (sin q, 1 - cos q) for a revolute joint and in q for a prismatic one:
        origin + a B + b C with B, C precomputed, one expression for every scalar joint."""
        if self._basis is None:
            O = origin[self.frames]
            K4 = np.zeros((len(self), 4, 4))
            K4[:, :3, :3] = self.K
            E = np.zeros((len(self), 4, 4))
            E[:, :3, 3] = self.axes
            pr = self.prismatic[:, None, None]
            self._basis = (O, np.where(pr, O @ E, O @ K4), np.where(pr, 0.0, O @ K4 @ K4))
        O, B, C = self._basis
        q = Q[:, self.at_vars]
        a = np.where(self.prismatic, q, np.sin(q)) if self.any_prismatic else np.sin(q)
        b = np.where(self.prismatic, 0.0, 1.0 - np.cos(q)) if self.any_prismatic else 1.0 - np.cos(q)
        M = out[:, self.at_frames] if isinstance(self.at_frames, slice) else np.empty((len(Q),) + O.shape)
        np.multiply(a[..., None, None], B, out=M)
        M += O
        M += b[..., None, None] * C
        if not isinstance(self.at_frames, slice):
            out[:, self.frames] = M

    needs_pre = False  # the axis is fixed by its own motion: R_pre a = R_world a

    def generators(self, q, pre, world, omega, linear, origin, rotational):
        """Motion generators per variable; arrays may carry leading batch dimensions (...)."""
        v = self.vars[:, 0]
        frames = world[..., self.at_frames, :, :]
        dirs = (frames[..., :3, :3] @ self.axes[:, :, None])[..., 0]
        if not self.any_prismatic:
            omega[..., self.at_vars, :], origin[..., self.at_vars, :] = dirs, frames[..., :3, 3]
            rotational[v] = True
            return
        o = frames[..., :3, 3]
        rot = ~self.prismatic
        omega[..., v[rot], :] = dirs[..., rot, :]
        origin[..., v[rot], :] = o[..., rot, :]
        rotational[v[rot]] = True
        linear[..., v[self.prismatic], :] = dirs[..., self.prismatic, :]

    def values_from_rotations(self, R, out):
        """The variables for joint rotations R (P, m, 3, 3), read as Blender reads a one-axis bone
        (ComputeTwist about Y, EulerAngleFromMatrix about X or Z); prismatic joints are left alone."""
        rot = ~self.prismatic
        main = np.argmax(np.abs(self.axes), axis=1)
        aligned = np.abs(self.axes[np.arange(len(self)), main]) == 1.0
        for a in (0, 1, 2):
            sel = rot & aligned & (main == a)
            if sel.any():
                val = blender_bone_angles(R[:, sel], (a,))[a]
                out[:, self.vars[sel, 0]] = val * np.sign(self.axes[sel, a])
        other = rot & ~aligned
        if other.any():  # any other axis k: the angle of R about k
            Ro = R[:, other]
            vee = np.stack([Ro[..., 2, 1] - Ro[..., 1, 2], Ro[..., 0, 2] - Ro[..., 2, 0],
                            Ro[..., 1, 0] - Ro[..., 0, 1]], -1)
            tr = Ro[..., 0, 0] + Ro[..., 1, 1] + Ro[..., 2, 2]
            out[:, self.vars[other, 0]] = np.arctan2(0.5 * np.sum(vee * self.axes[other], -1), 0.5 * (tr - 1.0))
        return self.vars[rot, 0]

    def bounds(self, lower, upper):
        for j, v in zip(self.joints, self.vars[:, 0]):
            if j.kind == "continuous":
                lower[v], upper[v] = -np.inf, np.inf
            else:
                lower[v], upper[v] = j.lower, j.upper

    def coupled(self):
        return self.vars[self.full_turn, 0]

    def project(self, Q):
        v = self.vars[:, 0]
        if np.any(self.continuous):
            c = v[self.continuous]
            Q[:, c] = wrap_angle(Q[:, c])
        if np.any(self.full_turn):  # outside its range: the fewest whole turns back into it
            t, lo, hi = v[self.full_turn], self.turn_range[:, 0], self.turn_range[:, 1]
            x = Q[:, t]
            below = np.where(x < lo, np.minimum(lo + np.mod(x - lo, 2.0 * np.pi), hi), x)
            Q[:, t] = np.where(x > hi, np.maximum(hi - np.mod(hi - x, 2.0 * np.pi), lo), below)  # (a span 1e-9
            # short of 2 pi: kept inside)


class BallModel(_Model):
    """Unlimited 3-DOF rotation (unlocked, unlimited bones): rotation vector, wrapped to norm <= pi."""

    nvar = 3

    def motion(self, Q):
        M = self._identity(Q.shape[0])
        M[..., :3, :3] = exp_so3(Q[:, self.vars])  # (P, m, 3) rotation vectors
        return M

    def generators(self, q, pre, world, omega, linear, origin, rotational):
        v = q[..., self.vars]
        cols = pre[..., self.frames, :3, :3] @ left_jacobian_so3(v)  # (..., m, 3, 3), a column per variable
        o = world[..., :3, 3][..., self.frames, :]
        for k in range(3):
            idx = self.vars[:, k]
            omega[..., idx, :] = cols[..., :, k]
            origin[..., idx, :] = o
            rotational[idx] = True

    def values_from_rotations(self, R, out):
        out[:, self.vars] = log_so3(R)
        return self.vars.ravel()

    def bounds(self, lower, upper):
        lower[self.vars] = -np.pi
        upper[self.vars] = np.pi

    def coupled(self):
        return self.vars.ravel()

    def project(self, Q):
        Q[:, self.vars] = wrap_rotation_vector(Q[:, self.vars])


class SwingTwistModel(_Model):
    """Blender bones with limits or locks.

    Variables per joint are the free axes among (x, y, z); the rotation is
    ``R = exp(sx X + sz Z) @ RotY(ty)`` where (sx, sz) are swing exponential coordinates and ty the
    twist (Blender's ComputeTwist). Locked axes have no variable and stay zero. The *elbow* case
    (one of x/z free together with y) keeps Blender's IK_QElbowSegment: ``RotAxis(a) @ RotY(ty)``.
    """

    nearest = False  # Blender's radial clamp; Tree(..., swing_projection="nearest") for the nearest point

    def __init__(self, entries, free):
        self.free = tuple(free)  # e.g. (0, 1, 2), (0, 2), (0, 1), (2, 1)... in x, y, z order
        self.nvar = len(free)
        super().__init__(entries)
        self.elbow = self.free in ((0, 1), (1, 2))
        lim = []
        for j in self.joints:
            d = {"x": 0, "y": 1, "z": 2}
            row = np.array([[-np.pi, np.pi]] * 3, dtype=float)
            has = np.zeros(3, bool)
            for key, (lo, hi) in j.limits.items():
                a = d[key]
                lo, hi = float(np.clip(lo, -np.pi, np.pi)), float(np.clip(hi, -np.pi, np.pi))
                if lo > hi:  # Blender ignores an inverted range (SetLimit returns)
                    continue
                row[a] = (lo, hi)
                has[a] = True
            lim.append((row, has))
        self.angle_limits = np.array([r for r, _ in lim])  # (m, 3, 2) radians
        self.limited = np.array([h for _, h in lim])  # (m, 3)
        # Swing limits as quaternion components sin(angle / 2) (IK_QSwingSegment::SetLimit).
        self.swing_lo = np.sin(0.5 * self.angle_limits[:, [0, 2], 0])
        self.swing_hi = np.sin(0.5 * self.angle_limits[:, [0, 2], 1])
        self.col = {a: k for k, a in enumerate(self.free)}

    def _swing_vars(self, Q):
        """(P, m, 2) swing coordinates (sx, sz), zero for locked axes."""
        S = np.zeros(Q.shape[:-1] + (len(self), 2))
        for a, k in ((0, 0), (2, 1)):
            if a in self.col:
                S[..., k] = Q[..., self.vars[:, self.col[a]]]
        return S

    def _rotation(self, Q):
        if self.elbow:
            a = 0 if 0 in self.col else 2
            A = axis_rotation(a, Q[..., self.vars[:, self.col[a]]])
        else:
            S = self._swing_vars(Q)
            A = exp_so3(np.stack([S[..., 0], np.zeros_like(S[..., 0]), S[..., 1]], axis=-1))
        if 1 in self.col:
            A = A @ axis_rotation(1, Q[..., self.vars[:, self.col[1]]])
        return A

    def motion(self, Q):
        M = self._identity(Q.shape[0])
        M[..., :3, :3] = self._rotation(Q)
        return M

    def generators(self, q, pre, world, omega, linear, origin, rotational):
        Rpre = pre[..., self.frames, :3, :3]
        o = world[..., :3, 3][..., self.frames, :]
        if self.elbow:
            a = 0 if 0 in self.col else 2
            swing_R = axis_rotation(a, q[..., self.vars[:, self.col[a]]])
            first = np.zeros((len(self), 3))
            first[:, a] = 1.0
            cols = {a: first}
        else:
            S = self._swing_vars(q)
            s3 = np.stack([S[..., 0], np.zeros_like(S[..., 0]), S[..., 1]], axis=-1)
            Jl = left_jacobian_so3(s3)
            cols = {0: Jl[..., :, 0], 2: Jl[..., :, 2]}
            swing_R = exp_so3(s3)
        cols[1] = swing_R[..., :, 1]  # twist turns about the swung bone axis
        for a, k in self.col.items():
            idx = self.vars[:, k]
            omega[..., idx, :] = (Rpre @ np.broadcast_to(cols[a], Rpre.shape[:-1])[..., None])[..., 0]
            origin[..., idx, :] = o
            rotational[idx] = True

    def values_from_rotations(self, R, out):
        """Blender's reading of a bone's basis (IK_QSegment::SetBasis), for all joints at once."""
        values = blender_bone_angles(R, self.free)
        for a, k in self.col.items():
            out[:, self.vars[:, k]] = values[a]
        return self.vars.ravel()

    def bounds(self, lower, upper):
        for a, k in self.col.items():
            idx = self.vars[:, k]
            if a == 1 or self.elbow:
                lower[idx] = np.where(self.limited[:, a], self.angle_limits[:, a, 0], -np.pi)
                upper[idx] = np.where(self.limited[:, a], self.angle_limits[:, a, 1], np.pi)
            else:  # coupled swing coordinates: a bounding box; project() is authoritative
                lower[idx] = -np.pi
                upper[idx] = np.pi

    def limit_normals(self, Q):
        """Swings resting on their limit: (var index pairs (m, 2), outward normals in (sx, sz) (K, m, 2) or
        None, on the limit (K, m)); None when this model has no swing limits."""
        if self.elbow or not {0, 2} <= set(self.col):
            return None
        if not hasattr(self, "_normal_setup"):  # what does not depend on Q, once
            swing_limited = self.limited[:, 0] | self.limited[:, 2]
            idx = np.stack([self.vars[:, self.col[0]], self.vars[:, self.col[2]]], axis=-1)
            self._normal_setup = (swing_limited.any(), swing_limited, idx, self.limited[:, 0] & self.limited[:, 2])
        any_limited, swing_limited, idx, both = self._normal_setup
        if not any_limited:
            return None
        S = self._swing_vars(Q)
        theta = np.sqrt(S[..., 0] ** 2 + S[..., 1] ** 2)[..., None]
        small = theta < 1e-9
        a = np.where(small, 0.5, np.sin(0.5 * theta) / np.where(small, 1.0, theta))
        xz = S * a  # the swing quaternion's (x, z), as _swing_quaternion_xz
        x, z = xz[..., 0], xz[..., 1]
        sx, sz = np.sign(x), np.sign(z)
        lim_x = np.maximum(np.where(sx < 0, -self.swing_lo[:, 0], self.swing_hi[:, 0]), 1e-9)
        lim_z = np.maximum(np.where(sz < 0, -self.swing_lo[:, 1], self.swing_hi[:, 1]), 1e-9)
        g = np.where(both, (x / lim_x) ** 2 + (z / lim_z) ** 2,
                     np.where(self.limited[:, 0], np.abs(x) / lim_x, np.abs(z) / lim_z))  # 1 on the limit
        near = (g >= 1.0 - 1e-6) & swing_limited
        if not near.any():
            return idx, None, near
        # Gradient of the limit value in xz (ellipse per quadrant, or the one limited range) ...
        gx = np.where(both, 2 * x / lim_x**2, np.where(self.limited[:, 0], sx / lim_x, 0.0))
        gz = np.where(both, 2 * z / lim_z**2, np.where(self.limited[:, 0], 0.0, sz / lim_z))
        gxz = np.stack([gx, gz], axis=-1)
        # ... chained through xz = u sin(theta / 2), u = S / theta: d xz / dS = a (I - u u^T) + b u u^T.
        b = 0.5 * np.cos(0.5 * theta)
        u = np.where(small, 0.0, S / np.where(small, 1.0, theta))
        grad = a * gxz + (b - a) * u * np.sum(u * gxz, axis=-1, keepdims=True)
        return idx, grad, near

    def coupled(self):
        if self.elbow:
            return np.zeros(0, dtype=int)
        return np.concatenate([self.vars[:, self.col[a]] for a in (0, 2) if a in self.col])

    def project(self, Q):
        if 1 in self.col:
            idx = self.vars[:, self.col[1]]
            lo, hi = self.angle_limits[:, 1, 0], self.angle_limits[:, 1, 1]
            Q[:, idx] = np.where(self.limited[:, 1], np.clip(Q[:, idx], lo, hi), wrap_angle(Q[:, idx]))
        if self.elbow:
            a = 0 if 0 in self.col else 2
            idx = self.vars[:, self.col[a]]
            lo, hi = self.angle_limits[:, a, 0], self.angle_limits[:, a, 1]
            Q[:, idx] = np.where(self.limited[:, a], np.clip(Q[:, idx], lo, hi), wrap_angle(Q[:, idx]))
            return
        S = self._swing_vars(Q)  # (P, m, 2)
        S = wrap_rotation_vector(S)  # same swing, angle <= pi: Blender's swing quaternion has w >= 0
        xz = _swing_quaternion_xz(S)
        clamped = swing_clamp(xz, self.swing_lo, self.swing_hi, self.limited[:, [0, 2]], nearest=self.nearest)
        # Only swings the clamp moved go back through arcsin (near 180 degrees its round trip alone moves a
        # swing by ~1e-8: a feasible swing must come out exactly as it went in).
        moved = np.any(clamped != xz, axis=-1, keepdims=True)
        S = np.where(moved, _swing_from_quaternion_xz(clamped), S)
        for a, k in ((0, 0), (2, 1)):
            if a in self.col:
                Q[:, self.vars[:, self.col[a]]] = S[..., k]


def stretch_values(Q, idx):
    """Scales of stretching bones, kept positive (FK stays defined for infeasible values too)."""
    return np.maximum(Q[..., idx], 1e-9)


class StretchModel(_Model):
    """IK stretch of bones: one scale variable s per bone, a uniform scale after the bone's rotation. Its
    Jacobian is the Tree's business (a stretch translates each child's subtree by its head offset), so the
    generators here are zero."""

    nvar = 1
    needs_pre = False

    def local(self, Q, origin, out):
        out[:, self.frames, :3, :3] *= stretch_values(Q, self.vars[:, 0])[..., None, None]

    def motion(self, Q):
        M = self._identity(Q.shape[0])
        M[..., :3, :3] *= stretch_values(Q, self.vars[:, 0])[..., None, None]
        return M

    def generators(self, q, pre, world, omega, linear, origin, rotational):
        return

    def bounds(self, lower, upper):
        for j, v in zip(self.joints, self.vars[:, 0]):
            lower[v] = min(1.0, STRETCH_MIN_LENGTH / max(j.length, 1e-12))
            upper[v] = np.inf

    def project(self, Q):
        return  # box bounds: the tree clips them


class FreeModel(_Model):
    """Free root: translation (3) then rotation vector (3) about the translated origin."""

    nvar = 6

    def motion(self, Q):
        x = Q[:, self.vars]  # (P, m, 6)
        M = self._identity(Q.shape[0])
        M[..., :3, :3] = exp_so3(x[..., 3:])
        M[..., :3, 3] = x[..., :3]
        return M

    def generators(self, q, pre, world, omega, linear, origin, rotational):
        Rpre = pre[..., self.frames, :3, :3]
        cols = Rpre @ left_jacobian_so3(q[..., self.vars[:, 3:]])
        o = world[..., :3, 3][..., self.frames, :]
        for k in range(3):
            linear[..., self.vars[:, k], :] = Rpre[..., :, k]
            idx = self.vars[:, 3 + k]
            omega[..., idx, :] = cols[..., :, k]
            origin[..., idx, :] = o
            rotational[idx] = True

    def values_from_rotations(self, R, out):
        out[:, self.vars[:, 3:]] = log_so3(R)
        return self.vars[:, 3:].ravel()

    def bounds(self, lower, upper):
        lower[self.vars[:, :3]], upper[self.vars[:, :3]] = -np.inf, np.inf
        lower[self.vars[:, 3:]], upper[self.vars[:, 3:]] = -np.pi, np.pi

    def coupled(self):
        return self.vars[:, 3:].ravel()

    def project(self, Q):
        Q[:, self.vars[:, 3:]] = wrap_rotation_vector(Q[:, self.vars[:, 3:]])


def bone_free_axes(joint):
    return tuple(a for a in range(3) if not joint.lock[a])


def bone_is_ball(joint):
    return bone_free_axes(joint) == (0, 1, 2) and not joint.limits


def bone_stretches(joint):
    return isinstance(joint, BoneJoint) and joint.stretch > 0.0


def joint_nvar(joint):
    if isinstance(joint, FreeJoint):
        return 6
    if isinstance(joint, BoneJoint):
        return len(bone_free_axes(joint)) + bone_stretches(joint)
    return 0 if joint.kind == "fixed" else 1


def joint_var_suffixes(joint):
    if isinstance(joint, FreeJoint):
        return ["x", "y", "z", "rx", "ry", "rz"]
    if isinstance(joint, BoneJoint):
        return ["xyz"[a] for a in bone_free_axes(joint)] + (["stretch"] if bone_stretches(joint) else [])
    return [""] if joint.kind != "fixed" else []


def joint_stiffness(joint):
    """Per-variable stiffness in [0, 0.99] (Blender's ik_stiffness_*)."""
    if isinstance(joint, BoneJoint):
        stretch = [1.0 - float(np.clip(joint.stretch, 0.0, 1.0)) ** 2] if bone_stretches(joint) else []
        return [float(np.clip(joint.stiffness[a], 0.0, 0.99)) for a in bone_free_axes(joint)] + stretch
    return [0.0] * joint_nvar(joint)


def build_models(entries):
    """entries: (frame index, first var index, joint) for every movable joint -> list of models."""
    scalar, ball, free, swing, stretch = [], [], [], {}, []
    for e in entries:
        j = e[2]
        if isinstance(j, FreeJoint):
            free.append(e)
        elif isinstance(j, BoneJoint):
            axes = bone_free_axes(j)
            if bone_stretches(j):
                stretch.append((e[0], e[1] + len(axes), j))
            if not axes:
                continue
            if len(axes) == 1:
                a = axes[0]
                lo, hi = j.limits.get("xyz"[a], (-np.inf, np.inf))
                if lo > hi:
                    lo, hi = -np.inf, np.inf
                kind = "revolute" if np.isfinite(lo) else "continuous"
                scalar.append(
                    (e[0], e[1], Joint(j.name, kind, j.parent, j.child, j.origin, tuple(np.eye(3)[a]),
                                       max(lo, -np.pi), min(hi, np.pi)))
                )
            elif bone_is_ball(j):
                ball.append(e)
            else:
                swing.setdefault(axes, []).append(e)
        elif j.kind != "fixed":
            scalar.append(e)
    models = []
    if scalar:
        models.append(ScalarModel(scalar))
    if ball:
        models.append(BallModel(ball))
    if free:
        models.append(FreeModel(free))
    for axes, es in swing.items():
        models.append(SwingTwistModel(es, axes))
    if stretch:
        models.append(StretchModel(stretch))  # last: it scales the rotations the others wrote
    return models


# ---------------------------------------------------------------------------------------------
# A bone's pose rotation from its variables and back (the rig bridge writes and reads poses with these)


def compute_twist(R):
    """Blender's ComputeTwist (IK_Math.h): the twist about Y of R = Swing @ Twist, in (-pi, pi]."""
    return 2.0 * np.arctan2(R[..., 0, 2] - R[..., 2, 0], R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] + 1.0)


def euler_angles_from_matrices(R, axis):
    """Blender's EulerAngleFromMatrix (IK_Math.h) for a hinge about X (0) or Z (2); R (..., 3, 3) -> (...)."""
    t = np.sqrt(R[..., 0, 0] ** 2 + R[..., 0, 1] ** 2)
    regular = t > 16.0 * 1e-20
    if axis == 0:
        return np.where(regular, -np.arctan2(R[..., 1, 2], R[..., 2, 2]), -np.arctan2(-R[..., 2, 1], R[..., 1, 1]))
    return np.where(regular, -np.arctan2(R[..., 0, 1], R[..., 0, 0]), 0.0)


def bone_rotation(joint, values):
    """The pose rotation (3 x 3, bone-local rest frame) of a BoneJoint from its variables."""
    axes = bone_free_axes(joint)
    values = np.asarray(values, dtype=float)
    if not axes:
        return np.eye(3)
    if bone_is_ball(joint):
        return exp_so3(values)
    if len(axes) == 1:
        return axis_rotation(axes[0], values[0])
    v = dict(zip(axes, values))
    if axes in ((0, 1), (1, 2)):  # elbow: RotAxis(a) @ RotY(twist)
        a = 0 if 0 in axes else 2
        return axis_rotation(a, v[a]) @ axis_rotation(1, v[1])
    return exp_so3(np.array([v.get(0, 0.0), 0.0, v.get(2, 0.0)])) @ axis_rotation(1, v.get(1, 0.0))


def blender_bone_angles(R, axes):
    """Blender's reading of a bone's basis (IK_QSegment::SetBasis) for free ``axes`` (not a ball joint):
    twist by ComputeTwist, the rest as hinge angle (one axis, or the elbow's) or swing. R (..., 3, 3) ->
    {axis: angle (...)}."""
    twist = compute_twist(R)
    if len(axes) == 1:
        a = axes[0]
        return {a: twist if a == 1 else euler_angles_from_matrices(R, a)}
    swing = R @ axis_rotation(1, -twist)  # RemoveTwist
    if tuple(axes) in ((0, 1), (1, 2)):  # elbow
        a = 0 if 0 in axes else 2
        return {a: euler_angles_from_matrices(swing, a), 1: twist}
    s = log_so3(swing)
    return {0: s[..., 0], 1: twist, 2: s[..., 2]}


def bone_values(joint, R):
    """The variables of a BoneJoint for a pose rotation R, read the way Blender's IK reads a bone's basis."""
    axes = bone_free_axes(joint)
    R = np.asarray(R, dtype=float)
    if not axes:
        return np.zeros(0)
    if bone_is_ball(joint):
        return log_so3(R)
    v = blender_bone_angles(R, axes)
    return np.array([float(v[k]) for k in axes])
