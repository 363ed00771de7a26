# SPDX-License-Identifier: GPL-3.0-or-later
"""Terrain under points: one BVH tree per terrain object (its evaluated mesh: modifiers applied), built once,
and vertical rays cast down from a given height, so the surface found is the one below that height (a bridge
over a valley, a floor under an overhang). Several terrain objects: the highest surface below wins."""

import numpy as np

from .armature import RigError


class Terrain:
    def __init__(self, objects, depsgraph):
        from mathutils.bvhtree import BVHTree

        if not objects:
            raise RigError("no terrain object given")
        self.objects, self.trees = [], []
        for obj in objects:
            if obj is None:
                raise RigError("a terrain object is missing")
            if obj.type != "MESH":
                raise RigError(f"terrain {obj.name!r} is a {obj.type.lower()}, not a mesh")
            evaluated = obj.evaluated_get(depsgraph)
            mesh = evaluated.to_mesh()
            try:
                faces = len(mesh.polygons)
            finally:
                evaluated.to_mesh_clear()
            if faces == 0:
                raise RigError(f"terrain {obj.name!r} has no faces (modifiers applied): nothing to stand on")
            tree = BVHTree.FromObject(obj, depsgraph)
            M = np.array(obj.matrix_world)
            self.objects.append(obj)
            self.trees.append((tree, M, np.linalg.inv(M)))

    def below(self, points, start):
        """For world points (N, 3): (height (N,), normal (N, 3), hit (N,)) of the highest terrain surface under
        each, casting down from height ``start`` (N,) at the point's x, y. No hit: NaN height, zero normal."""
        from mathutils import Vector

        points = np.asarray(points, dtype=float)
        n = len(points)
        height, normal, hit = np.full(n, np.nan), np.zeros((n, 3)), np.zeros(n, dtype=bool)
        for tree, M, Minv in self.trees:
            Rinv_T = Minv[:3, :3].T
            down = Minv[:3, :3] @ np.array([0.0, 0.0, -1.0])
            length = np.linalg.norm(down)
            down_v = Vector(down / length)
            for i in range(n):
                origin = Minv @ np.array([points[i, 0], points[i, 1], start[i], 1.0])
                location, nrm, _, _ = tree.ray_cast(Vector(origin[:3]), down_v)
                if location is None:
                    continue
                z = (M @ np.append(np.array(location), 1.0))[2]
                if not hit[i] or z > height[i]:
                    w = Rinv_T @ np.array(nrm)
                    w /= np.linalg.norm(w)
                    if w[2] < 0:  # the face's back: the up side of the surface is what we stand on
                        w = -w
                    height[i], normal[i], hit[i] = z, w, True
        return height, normal, hit
