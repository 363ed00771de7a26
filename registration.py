# SPDX-License-Identifier: GPL-3.0-or-later
"""Register and unregister a package's modules in order (and in reverse order)."""


def register_modules(modules):
    for module in modules:
        module.register()


def unregister_modules(modules):
    for module in reversed(modules):
        module.unregister()


def register_classes(classes):
    import bpy

    for cls in classes:
        bpy.utils.register_class(cls)


def unregister_classes(classes):
    import bpy

    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
