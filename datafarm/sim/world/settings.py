"""WorldSettings: the simulator's physical parameters that G does not give.

The defaults are the simulator's defaults plus the assumptions below. A simulator *variant*
(qualification, issue 3 item 6) is a small set of changes from these defaults; the qualification
report stores the settings it chose, so a task replays under the same physics.
"""

from __future__ import annotations

from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.sim.sapien_scene import DEFAULT_TIMESTEP


class WorldSettings(Artifact):
    """Physics parameters of a world built from G (every field has a default)."""

    timestep: FiniteFloat = Field(default=DEFAULT_TIMESTEP, gt=0, le=0.02)
    """Physics step, seconds."""
    friction_scale: FiniteFloat = Field(default=1.0, gt=0)
    """Multiplies every friction coefficient: G's objects, the table and the robot's finger pads."""
    restitution: FiniteFloat = Field(default=0.0, ge=0, le=1)
    """Restitution of every object and of the table (0: contacts do not bounce)."""
    table_friction: FiniteFloat = Field(default=0.6, ge=0)
    """Friction coefficient of the table top (assumed; G does not measure it)."""
    contact_offset: FiniteFloat = Field(default=0.002, gt=0)
    """Distance at which PhysX starts generating contacts for object shapes, metres (a pair of shapes
    gets the sum of their offsets; thin cup walls are capped lower, see `shapes.cup_shapes`)."""
    table_contact_offset: FiniteFloat = Field(default=0.001, gt=0)
    """Contact offset of the table top and the floor, metres."""
    rest_offset: FiniteFloat = Field(default=0.0, ge=0)
    """Distance at which object and table shapes come to rest against each other, metres."""
    solver_position_iterations: int = Field(default=10, ge=1, le=255)
    """PhysX position iterations of every body and articulation (SAPIEN's default is 10)."""
    solver_velocity_iterations: int = Field(default=1, ge=0, le=255)
    """PhysX velocity iterations of every body and articulation (SAPIEN's default is 1)."""
    drive_stiffness: FiniteFloat | None = Field(default=None, ge=0)
    """Arm joint PD stiffness; null keeps the robot description's default."""
    drive_damping: FiniteFloat | None = Field(default=None, ge=0)
    """Arm joint PD damping; null keeps the robot description's default."""
    gripper_stiffness: FiniteFloat | None = Field(default=None, ge=0)
    """Finger PD stiffness; null keeps the robot description's default."""
    drawer_damping: FiniteFloat = Field(default=2.0, ge=0)
    """Viscous damping of a drawer's slide, N s/m (assumed: a real drawer does not coast)."""
    drawer_friction: FiniteFloat = Field(default=0.05, ge=0)
    """Friction coefficient of a drawer's slide (PhysX joint friction: the slide resists motion with
    this fraction of the force it carries). Assumed, as for a drawer on wooden or plastic runners: a
    drawer left 10 cm open on a table tilted along its slide stays put at 0.5 degree, creeps 1 mm in
    5 s at 2 degrees and slides at 3.5 (tan 3 deg = 0.05); with 0, a 0.5 degree tilt runs it fully
    open or shut within 3 s."""
    enhanced_determinism: bool = False
    """PhysX enhanced determinism (not needed for bit-identical replays of one scene layout; see tests)."""
    gravity: FiniteFloat = Field(default=9.81, gt=0)
    """Magnitude of gravity (along -z), m/s^2; the scale converts its load to grams with it."""
