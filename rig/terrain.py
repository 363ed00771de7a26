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
        self.top = -np.inf  # the highest point of the terrain (world)
        for obj in objects:
            if obj is None:
                raise RigError("a terrain object is missing")
            if obj.type != "MESH":
                kind = obj.type.lower().replace("_", " ")
                raise RigError(f"terrain {obj.name!r} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a mesh")
            evaluated = obj.evaluated_get(depsgraph)
            mesh = evaluated.to_mesh()
            try:
                faces = len(mesh.polygons)
                co = np.zeros(3 * len(mesh.vertices), dtype=np.float32)  # (Blender's type: 3x faster to read)
                mesh.vertices.foreach_get("co", co)
                points = np.column_stack([co.reshape(-1, 3), np.ones(len(co) // 3)])  # (float64, as the ones)
                z = (np.array(obj.matrix_world) @ points.T)[2]
                self.top = max(self.top, float(z.max()) if len(z) else -np.inf)
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

    def nearest(self, points, layers=16):
        """For world points (N, 3): (height, hit) of the terrain surface nearest each point along its vertical,
        above or below it (every surface on the line is visited, from the top down): where a character stands
        when nothing else tells (the first frame: its feet may be under a surface that starts above them)."""
        points = np.asarray(points, dtype=float)
        n = len(points)
        start = np.full(n, self.top + 1.0)
        best, found = np.full(n, np.nan), np.zeros(n, dtype=bool)
        for _ in range(layers):
            h, _, ok = self.below(points, start)
            if not ok.any():
                break
            closer = ok & (~found | (np.abs(h - points[:, 2]) < np.abs(best - points[:, 2])))
            best[closer], found[closer] = h[closer], True
            start = np.where(ok, h - 1e-4, -np.inf)
        return best, found
