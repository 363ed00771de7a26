# SPDX-License-Identifier: GPL-3.0-or-later
"""Full-Body IK: a Blender extension for full-body inverse kinematics.

The package root is the extension. Nothing at package level imports bpy, so that
``import fullbody_ik.solvers`` works as a plain numpy/scipy library outside Blender.
"""

__all__ = ["register", "unregister"]

_cli_handle = None


def register():
    import os

    import bpy

    if not os.environ.get("NUMBA_CACHE_DIR"):  # the compiled core's cache in the extension's own user folder
        try:
            os.environ["NUMBA_CACHE_DIR"] = bpy.utils.extension_path_user(__package__, path="numba", create=True)
        except (ValueError, OSError):  # not installed as an extension (a plain module): the user's cache folder
            pass
    from . import cli, operators, panels, properties
    from .solvers import compiled

    global _cli_handle
    properties.register()
    operators.register()
    panels.register()
    # `blender -b scene.blend -c fullbody_ik bake ...`
    _cli_handle = bpy.utils.register_cli_command("fullbody_ik", cli.blender_command)
    if not bpy.app.background and compiled.warm_in_background():  # the first compile runs in another process;
        bpy.app.timers.register(_show_compile_progress, first_interval=1.0)  # the numpy path serves meanwhile


def _show_compile_progress():
    """Redraw the sidebars each second while the compiled core compiles (its status line counts the seconds)."""
    import bpy

    from .solvers import compiled

    for window in getattr(bpy.context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()
    return 1.0 if compiled.memetic_compiling() else None


def unregister():
    import bpy

    from . import operators, panels, properties

    global _cli_handle
    if bpy.app.timers.is_registered(_show_compile_progress):
        bpy.app.timers.unregister(_show_compile_progress)
    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    panels.unregister()
    operators.unregister()
    properties.unregister()
