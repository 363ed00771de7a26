# SPDX-License-Identifier: GPL-3.0-or-later
"""Sidebar panels of the 3D viewport (the "Full-Body IK" tab)."""

from ..registration import register_modules, unregister_modules
from . import sidebar

_modules = (sidebar,)


def register():
    register_modules(_modules)


def unregister():
    unregister_modules(_modules)
