# SPDX-License-Identifier: GPL-3.0-or-later
"""Frame after frame, Blender evaluating only what a job reads.

A bake sets every frame twice (reading the goals' targets, then judging the baked pose), and each ``frame_set``
evaluates everything in the scene that changes with time: the mocap armature while only the rig is judged, every
skinned mesh (the character's own, deformed by the rig) though no goal reads a vertex. Disabled in viewports, an
object is left out of that evaluation unless an object still shown depends on it (a constraint's target, a
driver's, a parent): Blender evaluates those as before, so what the job reads is what Blender shows.
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


def _objects(objects, seen):
    """The objects and, through collection instances, the objects they instance (once each)."""
    for obj in objects:
        if obj.as_pointer() in seen:
            continue
        seen.add(obj.as_pointer())
        yield obj
        if obj.instance_type == "COLLECTION" and obj.instance_collection is not None:
            yield from _objects(obj.instance_collection.all_objects, seen)


def simulation(scene):
    """The first thing in ``scene`` that simulates frame after frame (a name for messages), or None: a rigid body
    world, a simulation modifier or a collider, a force field, particles, simulation or bake nodes (in the scene's
    objects and in the collections they instance)."""
    if scene.rigidbody_world is not None:
        return "the rigid body world"
    trees = set()
    for obj in _objects(scene.objects, set()):
        if obj.rigid_body is not None or obj.rigid_body_constraint is not None:
            return obj.name
        if obj.field is not None and obj.field.type != "NONE":
            return obj.name
        for m in getattr(obj, "modifiers", ()):
            if m.type in SIMULATION_MODIFIERS or (m.type == "NODES" and _simulates(m.node_group, trees)):
                return obj.name
    return None


def _animated(id_block):
    ad = getattr(id_block, "animation_data", None)
    return ad is not None and (ad.action is not None or len(ad.drivers) > 0 or len(ad.nla_tracks) > 0)


def changes_with_time(obj):
    """Whether a frame change may evaluate ``obj`` again: keyed or driven (the object, its data, its shape keys),
    parented, constrained, instancing a collection, or with a modifier that reads another object (an Armature
    modifier's deforming armature). A static object is not evaluated again at a new frame: disabling it would only
    cost its evaluation when it is shown again (a subdivided set: 40 ms for 24k vertices)."""
    data = obj.data
    shape_keys = getattr(data, "shape_keys", None)
    if obj.parent is not None or len(obj.constraints) or obj.instance_type == "COLLECTION":
        return True
    if _animated(obj) or (data is not None and _animated(data)) or (shape_keys is not None and _animated(shape_keys)):
        return True
    return any(getattr(m, "object", None) is not None for m in getattr(obj, "modifiers", ()))


@contextmanager
def evaluating_only(scene, needed):
    """While inside, the objects of ``scene`` that change with time (changes_with_time), other than ``needed`` and
    those already disabled, are disabled in viewports, so that ``frame_set`` evaluates only ``needed``, the static
    objects and what they depend on; each is enabled again on the way out, whatever happens inside, and selected
    again where it was (disabling deselects). Nothing is disabled when ``needed`` is None, or when the scene
    simulates (simulation(): the frames evaluated feed its caches, and a collider or a field left out would change
    them). Yields how many were disabled. Use it only where nothing is drawn inside (a job run to its end, one
    step of a modal one: Baker.steps), and set a frame after leaving: an object enabled again shows the frame it
    was disabled on until then."""
    disabled = []  # (object, the scene's view layers it was selected in)
    try:
        if needed is not None and simulation(scene) is None:
            keep = {o.as_pointer() for o in needed if o is not None}
            candidates = [o for o in scene.objects if not o.hide_viewport and o.as_pointer() not in keep
                          and changes_with_time(o)]
            # (every selection read before any object is disabled: each read after one resyncs the view layers)
            selected = [[layer for layer in scene.view_layers if o.select_get(view_layer=layer)] for o in candidates]
            for obj, layers in zip(candidates, selected):
                try:
                    obj.hide_viewport = True
                except (AttributeError, RuntimeError, TypeError):  # (a flag that cannot be set: left evaluated)
                    continue
                disabled.append((obj, layers))
        yield len(disabled)
    finally:
        for obj, layers in disabled:
            try:
                obj.hide_viewport = False
            except (ReferenceError, RuntimeError):  # (deleted meanwhile)
                continue
            for layer in layers:
                try:
                    obj.select_set(True, view_layer=layer)
                except (ReferenceError, RuntimeError):  # (unlinked from that view layer meanwhile)
                    pass
