# SPDX-License-Identifier: GPL-3.0-or-later
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tests/helpers.py


import pytest  # noqa: E402


@pytest.fixture
def unregistered():
    """The extension unregistered after the test: a test that registers it leaves nothing behind
    (``pytestmark = pytest.mark.usefixtures("unregistered")`` in the modules that use bpy)."""
    yield
    bpy = sys.modules.get("bpy")
    if bpy is not None and hasattr(bpy.types.Object, "fullbody_ik"):
        import fullbody_ik

        fullbody_ik.unregister()


@pytest.fixture(scope="session")
def iiwa():
    """The KUKA LBR iiwa arm (7 revolute joints) from its URDF."""
    from helpers import urdf

    from fullbody_ik.solvers import Tree

    return Tree.from_urdf(urdf("kuka_iiwa.urdf"), "lbr_iiwa_link_0", "lbr_iiwa_link_7")

from hypothesis import settings  # noqa: E402

# CI runs the property tests on a fixed set of examples (no flaky red runs); locally they explore anew.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
