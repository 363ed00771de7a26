# SPDX-License-Identifier: GPL-3.0-or-later
"""Kinematic tree: links, joints, batched forward kinematics, Jacobians and feasibility."""

from collections import defaultdict
from copy import copy

import numpy as np

from . import compiled as _compiled
from .rotations import cross
from .joints import (
    BoneJoint,
    FreeJoint,
    Joint,
    build_models,
    index_run,
    joint_nvar,
    joint_stiffness,
    joint_var_suffixes,
    stretch_values,
)

NO_BOUND = 1e3  # a bound this far (radians or length units) is no bound to sample within (Tree.sample_lower)


def _check_finite(joint):
    """ValueError naming the joint when its origin, axis or limits hold a NaN (or its origin an infinity): a NaN
    would reach every solver's arithmetic (a memetic solve without a budget never ended)."""
    origin = np.asarray(getattr(joint, "origin", np.eye(4)), dtype=float)
    bad = [] if np.all(np.isfinite(origin)) else ["origin"]
    bad += [] if np.all(np.isfinite(np.asarray(getattr(joint, "axis", (1.0, 0.0, 0.0)), dtype=float))) else ["axis"]
    bad += [name for name in ("lower", "upper") if np.isnan(getattr(joint, name, 0.0))]
    for axis, (low, high) in (getattr(joint, "limits", None) or {}).items():
        bad += [f"{axis} limit"] if np.isnan(low) or np.isnan(high) else []
    if bad:
        raise ValueError(f"joint {joint.name!r}: its {', '.join(bad)} holds a value that is not a finite number")


class Tree:
    """A kinematic tree rooted at one fixed link (the base).

    ``joints`` is a list of :class:`Joint`, :class:`BoneJoint` or :class:`FreeJoint`, each naming its
    parent and child link. The configuration ``q`` holds the joints' variables in ``joint_names``
    order; links are in ``link_names`` order (topological: a parent before its children).
    """

    def __init__(self, joints, root=None, swing_projection="blender"):
        """``swing_projection``: "blender" (default: Blender's radial EllipseClamp) or "nearest" (the nearest
        point of the limit ellipse). Both keep exactly Blender's feasible set."""
        if swing_projection not in ("nearest", "blender"):
            raise ValueError(f"swing_projection must be 'nearest' or 'blender', got {swing_projection!r}")
        joints = list(joints)
        children = defaultdict(list)
        child_of = {}
        for j in joints:
            _check_finite(j)
            if j.child in child_of:
                raise ValueError(f"link {j.child!r} has two parent joints ({child_of[j.child].name!r}, {j.name!r})")
            child_of[j.child] = j
            children[j.parent].append(j)
        if root is None:
            roots = sorted({j.parent for j in joints} - set(child_of))
            if not roots:
                raise ValueError("the joints form a cycle: every link has a parent, none is the root")
            if len(roots) != 1:
                raise ValueError(f"the joints form {len(roots)} separate trees (roots: {', '.join(roots)}): give "
                                 "the base link of the one to use")
            root = roots[0]
        self.root = root
        names, parent, origin, link_joint = [root], [-1], [np.eye(4)], [None]
        index = {root: 0}
        queue = [root]
        while queue:  # breadth first: parents before children
            link = queue.pop(0)
            for j in children.get(link, ()):
                index[j.child] = len(names)
                names.append(j.child)
                parent.append(index[link])
                origin.append(np.asarray(j.origin, dtype=float).reshape(4, 4))
                link_joint.append(j)
                queue.append(j.child)
        unreachable = set(child_of) - set(index)
        if unreachable:
            raise ValueError(f"links not connected to {root!r}: {sorted(unreachable)}")

        self.link_names = names
        self._chain_lengths = None
        self.link_index = index
        self.parent = np.array(parent, dtype=int)
        self.origin = np.array(origin)
        self.joints = [j for j in link_joint if j is not None]
        self.link_joint = link_joint

        # Variables, in link order.
        var_names, stiffness, entries, self.joint_vars = [], [], [], {}
        var_link = []
        for i, j in enumerate(link_joint):
            if j is None:
                continue
            k = joint_nvar(j)
            first = len(var_names)
            self.joint_vars[j.name] = np.arange(first, first + k)
            for s in joint_var_suffixes(j):
                var_names.append(f"{j.name}.{s}" if s else j.name)
            stiffness += joint_stiffness(j)
            var_link += [i] * k
            if k:
                entries.append((i, first, j))
        self.joint_names = var_names
        self.n = len(var_names)
        self.var_link = np.array(var_link, dtype=int)
        self.weights = 1.0 - np.array(stiffness, dtype=float)  # Blender: weight = 1 - stiffness
        self.models = build_models(entries)
        for m in self.models:
            if hasattr(m, "nearest"):
                m.nearest = swing_projection == "nearest"

        self.lower = np.full(self.n, -np.inf)
        self.upper = np.full(self.n, np.inf)
        for m in self.models:
            m.bounds(self.lower, self.upper)
        self._clip_lower, self._clip_upper = self.lower.copy(), self.upper.copy()
        for m in self.models:
            c = m.coupled()
            self._clip_lower[c], self._clip_upper[c] = -np.inf, np.inf

        depth = np.zeros(len(names), dtype=int)
        for i in range(1, len(names)):
            depth[i] = depth[self.parent[i]] + 1
        self.levels = [np.flatnonzero(depth == d) for d in range(1, depth.max() + 1)] if len(names) > 1 else []
        self._serial = all(len(lvl) == 1 for lvl in self.levels)
        # FK level by level (links are in breadth-first order, so each level is a run of links and, when every
        # parent has one child in the next level, so are their parents): views, not gathers.
        self._level_plan = [(index_run(lvl), index_run(self.parent[lvl])) for lvl in self.levels]
        # ancestors[i, v]: variable v moves link i.
        self.ancestors = np.zeros((len(names), self.n), dtype=bool)
        for i in range(1, len(names)):
            self.ancestors[i] = self.ancestors[self.parent[i]]
            self.ancestors[i, self.var_link == i] = True
        self._init_stretch()
        # Per-tree constants of State.generators (the models decide them, not the configuration).
        self._needs_pre = any(m.needs_pre for m in self.models)
        probe = np.zeros(self.n, dtype=bool)
        for m in self.models:
            m.generators(np.zeros((1, self.n)), np.broadcast_to(np.eye(4), (1, len(names), 4, 4)),
                         np.broadcast_to(np.eye(4), (1, len(names), 4, 4)), np.zeros((1, self.n, 3)),
                         np.zeros((1, self.n, 3)), np.zeros((1, self.n, 3)), probe)
        self._rotational, self._translations = probe, not probe.all()
        # Random restarts and mutation sample a variable within its bounds; one with a bound missing, or beyond
        # anything a joint means (descriptions in the wild write "no limit" as +-999999 or +-1e16: restarts drawn
        # there land a million units away, and past 1e15 a float does not resolve a radian), within +-pi of its
        # value nearest 0, inside its bounds. They sample stretch within [1/2, 2] (its domain is unbounded above).
        near = (np.abs(self.lower) < NO_BOUND) & (np.abs(self.upper) < NO_BOUND)
        middle = np.clip(0.0, self.lower, self.upper)
        self.sample_lower = np.where(near, self.lower, np.maximum(self.lower, middle - np.pi))
        self.sample_upper = np.where(near, self.upper, np.minimum(self.upper, middle + np.pi))
        if self.has_stretch:
            self.sample_lower[self.stretch_vars] = np.maximum(self.lower[self.stretch_vars], 0.5)
            self.sample_upper[self.stretch_vars] = 2.0

    def _init_stretch(self):
        """Bones with IK stretch: their scale variable, link, the links that are their children (whose frames
        must not inherit the scale), and per (link, stretch) the child whose subtree holds the link."""
        from .joints import StretchModel

        model = next((m for m in self.models if isinstance(m, StretchModel)), None)
        self.has_stretch = model is not None
        if model is None:
            return
        self.stretch_vars, self.stretch_links = model.vars[:, 0], model.frames
        which = {int(link): k for k, link in enumerate(self.stretch_links)}
        kids = [(c, which[int(self.parent[c])]) for c in range(1, len(self.link_names)) if int(self.parent[c]) in which]
        self.stretch_children = np.array([c for c, _ in kids], dtype=int)
        self.stretch_children_of = np.array([k for _, k in kids], dtype=int)
        anchor = np.full((len(self.link_names), len(self.stretch_links)), -1, dtype=int)
        for i in range(1, len(self.link_names)):
            p = int(self.parent[i])
            anchor[i] = anchor[p]
            if p in which:
                anchor[i, which[p]] = i
        self.stretch_anchor = anchor

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_urdf(cls, path_or_xml, base_link=None, tip_links=None, mimic="refuse"):
        """Build from a URDF file path or XML string, optionally the sub-tree from base_link to tip_links.

        Mimic joints (a gripper's second finger) are not followed by the solvers: a tree that holds one is
        refused with its name (choose tip links above it), unless ``mimic="free"``, which solves it as an
        independent joint."""
        from .urdf import parse_urdf

        if mimic not in ("refuse", "free"):
            raise ValueError(f"mimic must be 'refuse' or 'free', got {mimic!r}")
        tree = cls.subtree_of(parse_urdf(path_or_xml), base_link, tip_links)
        unusable = [j for j in tree.joints if getattr(j, "problem", None)]
        if unusable:
            j = unusable[0]
            raise ValueError(f"joint {j.name!r}: {j.problem}; choose a base link below it (base_link={j.child!r}) or "
                             f"tip links that do not pass through it")
        followers = [j for j in tree.joints if getattr(j, "mimic", None)]
        if followers and mimic == "refuse":
            j = followers[0]
            more = f" (and {len(followers) - 1} more)" if len(followers) > 1 else ""
            raise ValueError(f"joint {j.name!r} mimics {j.mimic[0]!r} (multiplier {j.mimic[1]:g}, offset "
                             f"{j.mimic[2]:g}){more}: mimic joints are not followed by the solvers; choose tip links "
                             f"above {j.child!r}, or pass mimic='free' to solve it as an independent joint")
        return tree

    @classmethod
    def subtree_of(cls, joints, base_link=None, tip_links=None):
        if base_link is not None:  # only what hangs below the base (a description may hold several trees)
            below, children = {base_link}, defaultdict(list)
            for j in joints:
                children[j.parent].append(j)
            queue, kept = [base_link], []
            while queue:
                for j in children.get(queue.pop(), ()):
                    if j.child not in below:
                        below.add(j.child)
                        kept.append(j)
                        queue.append(j.child)
            if not kept:
                raise ValueError(f"no link named {base_link!r} with joints below it")
            joints = kept
        tree = cls(joints, root=base_link)
        if base_link is None and tip_links is None:
            return tree
        base = tree.root if base_link is None else base_link
        if base not in tree.link_index:
            raise ValueError(f"no link named {base!r}")
        if isinstance(tip_links, str):
            tip_links = [tip_links]
        keep = set()
        if tip_links is None:
            b = tree.link_index[base]
            for i in range(len(tree.link_names)):
                a = i
                while a != -1 and a != b:
                    a = tree.parent[a]
                if a == b:
                    keep.add(i)
        else:
            for tip in tip_links:
                if tip not in tree.link_index:
                    raise ValueError(f"no link named {tip!r}")
                a = tree.link_index[tip]
                path = []
                while a != -1 and tree.link_names[a] != base:
                    path.append(a)
                    a = tree.parent[a]
                if a == -1:
                    raise ValueError(f"link {tip!r} is not below {base!r}")
                keep.update(path)
        kept = [tree.link_joint[i] for i in sorted(keep) if tree.link_joint[i] is not None and tree.link_names[i] != base]
        if not kept:
            raise ValueError(f"the sub-tree from {base!r} has no joints")
        return cls(kept, root=base)

    # ------------------------------------------------------------------------------------------
    def set_origins(self, links, origins):
        """Per-solve input: the fixed transforms ``origins`` (k, 4, 4) of the joints of ``links`` (k indices).

        The tree's structure (joints, variables, limits) stays; what moves a joint frame from outside the
        solve changes between solves (an action's root location that is not solved, locked bones' rotation).
        Chain lengths stay those of the structure (they scale losses, paper 000 eq. 14, not positions)."""
        self.chain_length(0)  # fixed from the structure before the first input
        self.characteristic_length  # likewise (a walking root's location is not a link's length)
        links = np.asarray(links, dtype=int)
        self.origin[links] = origins
        for m in self.models:
            if getattr(m, "_basis", None) is not None:  # constants precomputed from the origins
                m._basis = None

    def link(self, name):
        try:
            return self.link_index[name]
        except KeyError:
            raise KeyError(f"no link named {name!r} in the tree") from None

    def var(self, name):
        """Index in q of a variable (a name from ``joint_names``) or of a one-variable joint."""
        if name in self.joint_vars and len(self.joint_vars[name]) == 1:
            return int(self.joint_vars[name][0])
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"no joint variable named {name!r}") from None

    def _as_batch(self, Q):
        Q = np.asarray(Q, dtype=float)
        single = Q.ndim == 1
        Q = np.atleast_2d(Q)
        if Q.shape[-1] != self.n:
            raise ValueError(f"configuration has {Q.shape[-1]} values, the tree has {self.n} variables")
        return Q, single

    def fk_batch(self, Q):
        """(P, n) -> (P, L, 4, 4) world matrices of every link, in ``link_names`` order."""
        Q, _ = self._as_batch(Q)
        P, L = Q.shape[0], len(self.link_names)
        local = np.empty((P, L, 4, 4))
        local[:] = self.origin
        for model in self.models:
            model.local(Q, self.origin, local)
        if self.has_stretch and len(self.stretch_children):  # children keep their own scale: their head
            # offsets are scaled with the bone (origin in its scaled frame), their rotations are not
            s = stretch_values(Q, self.stretch_vars[self.stretch_children_of])
            local[:, self.stretch_children, :3, :3] /= s[..., None, None]
        world = local
        if P == 1:  # one configuration: 2-D products on views
            w = world[0]
            if self._serial:
                for i in range(1, L):
                    w[i] = w[i - 1] @ w[i]
            else:
                for links, parents in self._level_plan:
                    w[links] = w[parents] @ w[links]
            return world
        for links, parents in self._level_plan:
            world[:, links] = world[:, parents] @ world[:, links]
        return world

    def joint_rotations(self, Q):
        """(P, L, 3, 3) the rotation each link's joint adds (identity for fixed joints and the root): a
        bone's pose rotation in its rest frame."""
        Q, _ = self._as_batch(Q)
        R = np.broadcast_to(np.eye(3), (Q.shape[0], len(self.link_names), 3, 3)).copy()
        for m in self.models:
            if hasattr(m, "values_from_rotations"):  # the rotating models (not stretch)
                R[:, m.frames] = m.motion(Q)[..., :3, :3]
        return R

    def values_from_rotations(self, R, Q=None):
        """Inverse of joint_rotations: (P, n) configurations whose rotation variables are read from R
        (P, L, 3, 3) the way Blender's IK reads bones; other variables (translations, stretch) are taken from
        Q (default zero)."""
        R = np.asarray(R, dtype=float)
        out = np.zeros((R.shape[0], self.n)) if Q is None or not self.n else \
            np.array(Q, dtype=float).reshape(-1, self.n).copy()
        for m in self.models:
            if hasattr(m, "values_from_rotations"):
                m.values_from_rotations(R[:, m.frames], out)
        return out

    def fk(self, q):
        """{link name: 4x4 world matrix} for one configuration."""
        W = self.fk_batch(np.asarray(q, dtype=float)[None])[0]
        return {name: W[i] for i, name in enumerate(self.link_names)}

    def state(self, q):
        """Kinematic state of one configuration: link matrices and Jacobians."""
        q = np.asarray(q, dtype=float)
        return State(self, q, self.fk_batch(q[None])[0])

    def project(self, Q):
        """Nearest feasible configuration(s) in Blender's sense (clip, wrap, swing ellipse clamp)."""
        if type(Q) is np.ndarray and Q.shape == (self.n,):  # one configuration: the same projection, compiled
            out = _compiled.project_one(self, Q)  # (None: not covered)
            if out is not None:
                return out
        Q, single = self._as_batch(Q)
        Q = np.where(np.isfinite(Q), Q, 0.0)
        Q = np.clip(Q, self._clip_lower, self._clip_upper)
        for m in self.models:
            m.project(Q)
        return Q[0] if single else Q

    def held(self, q, dq):
        """(..., n) bools: box-bounded variables resting on a bound that a step dq pushes outward; solvers hold
        them and solve for the rest. (Holding swings on their ellipse the same way was measured to hurt:
        tracking errors grew from 15 to 126 mm on CMU 02_03; swings slide along their limit instead:
        tangent_projector.)"""
        return ((q <= self._clip_lower + 1e-12) & (dq < 0.0)) | ((q >= self._clip_upper - 1e-12) & (dq > 0.0))

    def swing_limits(self, Q):
        """The swings of Q (K, n) resting on their limit ellipse: [(var index pairs (m, 2), outward normals
        (K, m, 2), on the limit (K, m))] for the models that have any (the geometry of tangent_projector,
        computed once per configuration)."""
        out = []
        for m in self.models:
            found = m.limit_normals(Q) if hasattr(m, "limit_normals") else None
            if found is not None and found[2].any():
                out.append(found)
        return out

    def tangent_projector(self, Q, dQ, scale, P=None, limits=None):
        """Projectors onto the steps that slide along the swing limits Q rests on and dQ pushes against,
        in variables scaled by ``scale`` (steps dq = scale * du): ``I - sum n n^T`` with n the unit normal
        of each such limit in u. (K, n, n) for a batch, (n, n) for one q; None when no limit is active.
        Solving the damped least squares within this subspace keeps the step a descent direction, which
        trimming the normal part off the full step does not. ``P``: a projector from an earlier call, whose
        limits stay in (the active set only grows); ``limits``: ``swing_limits(Q)`` if already known."""
        single = np.ndim(Q) == 1
        Q2, dQ2 = np.atleast_2d(Q), np.atleast_2d(dQ)
        if P is not None:
            P = np.array(P, dtype=float).reshape(len(Q2), self.n, self.n)
        for idx, N, near in (self.swing_limits(Q2) if limits is None else limits):
            push = np.sum(np.stack([dQ2[:, idx[:, 0]], dQ2[:, idx[:, 1]]], axis=-1) * N, axis=-1)
            active = near & (push > 0.0)
            if not active.any():
                continue
            if P is None:
                P = np.tile(np.eye(self.n), (len(Q2), 1, 1))
            rows, joints = np.nonzero(active)
            a, b = idx[joints, 0], idx[joints, 1]
            # not already sliding along this limit: its 2x2 block still the identity (a normal along b alone
            # leaves P[a, a] at 1: subtracted twice it would mirror the step instead of sliding)
            fresh = (P[rows, a, a] > 1.0 - 1e-12) & (P[rows, b, b] > 1.0 - 1e-12) & (np.abs(P[rows, a, b]) < 1e-12)
            rows, a, b, joints = rows[fresh], a[fresh], b[fresh], joints[fresh]
            nu = N[rows, joints] * np.stack([scale[a], scale[b]], axis=-1)
            nu /= np.maximum(np.linalg.norm(nu, axis=-1, keepdims=True), 1e-300)
            P[rows, a, a] -= nu[:, 0] * nu[:, 0]
            P[rows, a, b] -= nu[:, 0] * nu[:, 1]
            P[rows, b, a] -= nu[:, 1] * nu[:, 0]
            P[rows, b, b] -= nu[:, 1] * nu[:, 1]
        if P is None:
            return None
        return P[0] if single else P

    def is_feasible(self, q, tol=1e-9):
        q = np.asarray(q, dtype=float)
        return bool(np.all(np.isfinite(q)) and np.max(np.abs(self.project(q) - q), initial=0.0) <= tol)

    def frame_copy(self):
        """A copy with the per-solve input as it is now (the origins) and everything else shared: a frame solved
        in another thread keeps its origins while this tree takes the next frame's (set_origins). The
        structure-derived constants are made first, so the copies share them; models that cache constants of the
        origins get their own instance."""
        self.chain_length(0)
        self.characteristic_length
        if _compiled.covers_tree(self):
            _compiled._tree_arrays(self)  # the kernels' structure arrays (origins apart), made once
        out = object.__new__(Tree)
        out.__dict__.update(self.__dict__)
        out.__dict__.pop("_compiled_works", None)  # (the compiled LM's work spaces: the copy's own, made for it)
        out.__dict__.pop("_compiled_last", None)
        out.origin = self.origin.copy()
        out.models = [copy(m) if hasattr(m, "_basis") else m for m in self.models]
        return out

    def span(self):
        """Finite width of each variable's domain (for sampling and mutation)."""
        return self.sample_upper - self.sample_lower

    @property
    def characteristic_length(self):
        """The mean length of the links' offsets from their parents (those not zero; 1 when every one is): the
        tree's scale (paper 001 §III sets LM's damping bias by it). Read once, from the structure (set_origins
        reads it before its first input)."""
        known = self.__dict__.get("_characteristic_length")
        if known is None:
            d = np.linalg.norm(np.asarray(self.origin)[1:, :3, 3], axis=1)
            d = d[d > 1e-9]
            known = self._characteristic_length = float(d.mean()) if len(d) else 1.0
        return known

    def random_configurations(self, rng, count):
        """(count, n) feasible configurations, uniform in each variable's range before projection."""
        rng = np.random.default_rng(rng)
        return self.project(rng.uniform(self.sample_lower, self.sample_upper, size=(count, self.n)))

    def chain_length(self, link):
        """Sum of the joint offsets from the root to a link (paper 000's L for the position loss); for an array of
        link indices, theirs."""
        if self._chain_lengths is None:
            lengths = np.zeros(len(self.link_names))
            for i in range(1, len(lengths)):
                lengths[i] = lengths[self.parent[i]] + np.linalg.norm(self.origin[i, :3, 3])
            self._chain_lengths = lengths
        return self._chain_lengths[self.link(link) if isinstance(link, str) else link]

    def __repr__(self):
        return f"<Tree {len(self.link_names)} links, {self.n} variables, root {self.root!r}>"


class State:
    """Link matrices of one configuration (``q`` (n,), ``world`` (L, 4, 4)) or of a batch (``q`` (P, n),
    ``world`` (P, L, 4, 4)), with lazily computed motion generators and Jacobians (batched alike)."""

    def __init__(self, tree, q, world):
        self.tree, self.q, self.world = tree, q, world
        self._gen = None
        self._links_J = None
        self.cache = {}  # objectives keep per-state values here (residuals are asked for several times)

    def matrix(self, link):
        return self.world[..., link, :, :]

    def generators(self):
        """Per variable: world angular axis, linear direction, rotation origin (each (..., n, 3)), and
        whether the variable rotates (n,)."""
        if self._gen is None:
            t, n, batch = self.tree, self.tree.n, self.q.shape[:-1]
            omega, origin = np.zeros(batch + (n, 3)), np.zeros(batch + (n, 3))
            linear = np.zeros(batch + (n, 3)) if t._translations else omega  # unused when nothing translates
            rotational = np.zeros(n, dtype=bool)
            pre = None
            world = self.rigid_world() if t.has_stretch else self.world  # axes turn, they do not scale
            if t._needs_pre:
                par = t.parent
                parent_world = np.where(par[:, None, None] >= 0, world[..., np.maximum(par, 0), :, :],
                                        np.eye(4))
                pre = parent_world @ t.origin
            for m in t.models:
                m.generators(self.q, pre, world, omega, linear, origin, rotational)
            self._gen = (omega, linear, origin, rotational)
            self._translations = t._translations
        return self._gen

    def stretch(self):
        """(..., k) the scale of each stretching bone (Tree.stretch_links)."""
        return stretch_values(self.q, self.tree.stretch_vars)

    def rigid_world(self):
        """Link matrices without the stretch scale of stretching bones (their rotation, their head)."""
        if not self.tree.has_stretch:
            return self.world
        w = self.cache.get("rigid_world")
        if w is None:
            w = self.world.copy()
            w[..., self.tree.stretch_links, :3, :3] /= self.stretch()[..., None, None]
            self.cache["rigid_world"] = w
        return w

    def rotation(self, link):
        """(..., 3, 3) world rotation of a link (without a stretching bone's scale)."""
        return self.rigid_world()[..., link, :3, :3]

    def link_jacobians(self):
        """(..., L, 6, n) geometric Jacobians of every link origin, computed together once per state."""
        if self._links_J is None:
            omega, linear, origin, rotational = self.generators()  # omega is zero for translations
            pos = self.world[..., :, :3, 3]
            lin = cross(omega[..., None, :, :], pos[..., :, None, :] - origin[..., None, :, :])  # (..., L, n, 3)
            if self._translations:
                lin = np.where(rotational[:, None], lin, linear[..., None, :, :])
            if self.tree.has_stretch:  # d/ds moves the subtree of each child by its head offset / s
                t = self.tree
                A = t.stretch_anchor  # (L, k)
                offset = pos[..., np.maximum(A, 0), :] - pos[..., None, t.stretch_links, :]  # (..., L, k, 3)
                rate = np.where((A >= 0)[..., None], offset / self.stretch()[..., None, :, None], 0.0)
                lin[..., t.stretch_vars, :] = rate
            J = np.empty(pos.shape[:-1] + (6, self.tree.n))
            J[..., :3, :] = np.swapaxes(lin, -1, -2)
            J[..., 3:, :] = np.swapaxes(omega, -1, -2)[..., None, :, :]
            J *= self.tree.ancestors[:, None, :]
            self._links_J = J
        return self._links_J

    def point_jacobian(self, link, point):
        """(..., 6, n) geometric Jacobian of a world point fixed to ``link``: linear rows, then angular.

        Computed from the motion generators for this point alone (per goal: cheaper than every link's Jacobian
        at once for up to about a third of the links, measured on human.urdf); with IK stretch, from
        link_jacobians."""
        point = np.asarray(point, dtype=float)
        if self._links_J is None and not self.tree.has_stretch:
            return self.points_jacobian(np.array([link]), point[..., None, :])[..., 0, :, :]
        J = self.link_jacobians()[..., link, :, :].copy()
        d = point - self.world[..., link, :3, 3]
        if d.any():  # v_p = v_o + omega x (p - o)
            J[..., :3, :] += np.swapaxes(cross(np.swapaxes(J[..., 3:, :], -1, -2), d[..., None, :]), -1, -2)
        if self.tree.has_stretch:
            k = np.flatnonzero(self.tree.stretch_links == link)
            if len(k):  # a point on a stretching bone moves with its scale: d (p - head) / ds = (p - head) / s
                J[..., :3, self.tree.stretch_vars[k[0]]] += d / self.stretch()[..., k[0], None]
        return J

    def points_jacobian(self, links, points):
        """(..., G, 6, n) point Jacobians of G goals at once: ``links`` (G,), ``points`` (..., G, 3) (or (G, 3)
        shared by a batch)."""
        points = np.broadcast_to(np.asarray(points, dtype=float), self.q.shape[:-1] + (len(links), 3))
        if self.tree.has_stretch:
            return np.stack([self.point_jacobian(int(l), points[..., k, :]) for k, l in enumerate(links)], axis=-3)
        omega, linear, origin, rotational = self.generators()
        lin = cross(omega[..., None, :, :], points[..., :, None, :] - origin[..., None, :, :])  # (..., G, n, 3)
        if self._translations:
            lin = np.where(rotational[:, None], lin, linear[..., None, :, :])
        J = np.empty(points.shape[:-1] + (6, self.tree.n))
        J[..., :3, :] = np.swapaxes(lin, -1, -2)
        J[..., 3:, :] = np.swapaxes(omega, -1, -2)[..., None, :, :]
        J *= self.tree.ancestors[links][:, None, :]
        return J

class BatchState(State):
    """The state of P configurations: ``q`` (P, n), ``world`` (P, L, 4, 4)."""

    def __init__(self, tree, Q, world=None):
        Q = np.asarray(Q, dtype=float)
        super().__init__(tree, Q, tree.fk_batch(Q) if world is None else world)


__all__ = ["Tree", "State", "Joint", "BoneJoint", "FreeJoint"]
