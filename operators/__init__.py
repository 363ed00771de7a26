# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender operators (``bpy.ops.fullbody_ik.*``). Thin: gather from context, call the rig bridge, report."""

# Operator modules are added here as they land (goals, solve, drag, bake: see the issues).
_modules = ()


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
