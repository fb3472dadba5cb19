"""RobotSpec: which robot to put in a scene, where, and with which joint drives."""

from __future__ import annotations

from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat, Vec3
from datafarm.artifacts.request import BUILTIN_ROBOTS


class RobotSpec(Artifact):
    """A robot for a SAPIEN scene: a builtin description (`piper`, `piper-dual`) or a user URDF file.

    Placement: a single arm's base sits at (`base_xy`, `base_height`) turned by `base_yaw` about world
    z. For `piper-dual` that point is the midpoint between the two bases; the `left_` arm sits at
    +`spacing`/2 along the (yawed) y axis and the `right_` arm at -`spacing`/2, both facing +x (yawed).
    """

    model: str = "piper"
    """`piper` (one arm), `piper-dual` (two arms, names prefixed `left_`/`right_`), or a path to a .urdf file."""
    base_xy: tuple[FiniteFloat, FiniteFloat] = (0.0, 0.0)
    """World (x, y) of the base, metres (for `piper-dual`: the midpoint between the two bases)."""
    base_height: FiniteFloat = 0.0
    """World z of the base mounting plane, metres."""
    base_yaw: FiniteFloat = 0.0
    """Rotation of the base(s) about world z, radians (0: the arm faces +x)."""
    spacing: FiniteFloat = Field(0.6, gt=0)
    """`piper-dual` only: distance between the two bases along the (yawed) y axis, metres."""
    stiffness: FiniteFloat = Field(1000.0, ge=0)
    """PD drive stiffness of the arm joints (N m/rad for revolute joints)."""
    damping: FiniteFloat = Field(100.0, ge=0)
    """PD drive damping of the arm joints (N m s/rad for revolute joints)."""
    gripper_stiffness: FiniteFloat = Field(2000.0, ge=0)
    """PD drive stiffness of the finger joints (N/m)."""
    gripper_damping: FiniteFloat = Field(100.0, ge=0)
    """PD drive damping of the finger joints (N s/m)."""
    gravity_compensation: bool = True
    """Add the passive forces (gravity, Coriolis and centrifugal) to every joint before each step."""
    self_collision: bool = False
    """Let links of the same arm collide with each other (off: the simple capsules overlap at joints)."""
    ee_link: str | None = None
    """User URDF only: the link the TCP is fixed to (default: the last link of the longest chain)."""
    tcp_offset: Vec3 = (0.0, 0.0, 0.0)
    """User URDF only: TCP position in `ee_link`'s frame, metres (orientation = the link's)."""
    gripper_joints: tuple[str, ...] = ()
    """User URDF only: two prismatic finger joints (a parallel gripper, each opening to its nonzero limit)."""

    @property
    def builtin(self) -> bool:
        """True when `model` names a description datafarm writes itself."""
        return self.model in BUILTIN_ROBOTS
