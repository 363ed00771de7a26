# SPDX-License-Identifier: GPL-3.0-or-later
"""Full-Body IK: a Blender extension for full-body inverse kinematics.

The package root is the extension. Nothing at package level imports bpy, so that
``import fullbody_ik.solvers`` works as a plain numpy/scipy library outside Blender.
"""

__all__ = ["register", "unregister"]

_cli_handle = None


def register():
    import bpy

    from . import cli, operators, panels, properties

    global _cli_handle
    properties.register()
    operators.register()
    panels.register()
    # `blender -b scene.blend -c fullbody_ik bake ...`
    _cli_handle = bpy.utils.register_cli_command("fullbody_ik", cli.blender_command)


def unregister():
    import bpy

    from . import operators, panels, properties

    global _cli_handle
    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    panels.unregister()
    operators.unregister()
    properties.unregister()
