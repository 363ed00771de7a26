# SPDX-License-Identifier: GPL-3.0-or-later
"""Sidebar panels of the 3D viewport (the "Full-Body IK" tab)."""

from ..registration import register_modules, unregister_modules

# Panel modules are added here as they land.
_modules = ()


def register():
    register_modules(_modules)


def unregister():
    unregister_modules(_modules)
