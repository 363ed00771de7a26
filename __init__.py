# SPDX-License-Identifier: GPL-3.0-or-later
"""Full-Body IK: a Blender extension for full-body inverse kinematics.

The package root is the extension. Nothing at package level imports bpy, so that
``import fullbody_ik.solvers`` works as a plain numpy/scipy library outside Blender.
"""

__all__ = ["register", "unregister"]


def register():
    from . import operators, panels, properties

    properties.register()
    operators.register()
    panels.register()


def unregister():
    from . import operators, panels, properties

    panels.unregister()
    operators.unregister()
    properties.unregister()
