# SPDX-License-Identifier: GPL-3.0-or-later
"""Frame after frame, Blender evaluating only what a job reads.

A bake sets every frame twice (reading the goals' targets, then judging the baked pose), and each ``frame_set``
evaluates every animated thing of the scene: the mocap armature while only the rig is judged (a third of a compiled
bake frame on the CMU benchmarks), every skinned mesh (the character's own, deformed by the rig) though no goal reads
a vertex. Disabled in viewports, an object is left out of that evaluation unless an object still shown depends on
it (a constraint's target, a driver's, a parent): Blender evaluates those as before, so what the job reads is what
Blender shows.
"""

from contextlib import contextmanager

# Modifiers whose result depends on the frames evaluated before (a simulation, a cache being filled) or that take
# part in one (a collider): a scene with any of these is evaluated whole, as without this.
SIMULATION_MODIFIERS = frozenset((
    "CLOTH", "SOFT_BODY", "FLUID", "DYNAMIC_PAINT", "PARTICLE_SYSTEM", "COLLISION", "OCEAN", "EXPLODE", "SURFACE"))
SIMULATION_NODES = frozenset(("GeometryNodeSimulationInput", "GeometryNodeSimulationOutput", "GeometryNodeBake"))


def _simulates(tree, seen):
    """Whether a geometry node tree (or a group in it) simulates or bakes."""
    if tree is None or tree.name_full in seen:
        return False
    seen.add(tree.name_full)
    for node in tree.nodes:
        if node.bl_idname in SIMULATION_NODES:
            return True
        if getattr(node, "node_tree", None) is not None and _simulates(node.node_tree, seen):
            return True
    return False


def simulation(scene):
    """The first thing in ``scene`` that simulates frame after frame (a name for messages), or None: a rigid body
    world, a simulation modifier or a collider, a force field, particles, simulation or bake nodes."""
    if scene.rigidbody_world is not None:
        return "the rigid body world"
    seen = set()
    for obj in scene.objects:
        if obj.rigid_body is not None or obj.rigid_body_constraint is not None:
            return obj.name
        if obj.field is not None and obj.field.type != "NONE":
            return obj.name
        for m in getattr(obj, "modifiers", ()):
            if m.type in SIMULATION_MODIFIERS or (m.type == "NODES" and _simulates(m.node_group, seen)):
                return obj.name
    return None


@contextmanager
def evaluating_only(scene, needed):
    """While inside, the objects of ``scene`` other than ``needed`` (and those already disabled) are disabled in
    viewports, so that ``frame_set`` evaluates only ``needed`` and what they depend on; each is enabled again on
    the way out, whatever happens inside, and selected again where it was (disabling deselects). Nothing is
    disabled when ``needed`` is None, or when the scene simulates (simulation(): the frames evaluated feed its
    caches, and a collider or a field left out would change them). Yields how many were disabled. Use it only
    where nothing is drawn in between (a job run to its end, not a modal step)."""
    disabled = []  # (object, the scene's view layers it was selected in)
    try:
        if needed is not None and simulation(scene) is None:
            keep = {o.as_pointer() for o in needed if o is not None}
            for obj in scene.objects:
                if obj.hide_viewport or obj.as_pointer() in keep:
                    continue
                selected = [layer for layer in scene.view_layers if obj.select_get(view_layer=layer)]
                try:
                    obj.hide_viewport = True
                except (AttributeError, RuntimeError, TypeError):  # (linked from a library: not editable)
                    continue
                disabled.append((obj, selected))
        yield len(disabled)
    finally:
        for obj, selected in disabled:
            try:
                obj.hide_viewport = False
                for layer in selected:
                    obj.select_set(True, view_layer=layer)
            except ReferenceError:  # (deleted meanwhile)
                pass
