# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender operators (``bpy.ops.fullbody_ik.*``). Thin: gather from context, call the rig bridge, report."""

from ..registration import register_modules, unregister_modules
from . import bake, drag, feet, goals, retarget, solve

_modules = (goals, solve, drag, bake, feet, retarget)


def register():
    register_modules(_modules)


def unregister():
    unregister_modules(_modules)
