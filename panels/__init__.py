# SPDX-License-Identifier: GPL-3.0-or-later
"""Sidebar panels of the 3D viewport (the "Full-Body IK" tab)."""

# Panel modules are added here as they land.
_modules = ()


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
