"""The evaluation context over one trajectory: body references resolved to geometry or contact
bodies, per-step frames and points, contact masks. Results are cached, since predicates and
invariants ask for the same things many times.

Body references (datafarm.artifacts.judge.BodyRef) resolve as follows:

| reference | geometry | matches contact bodies |
| --- | --- | --- |
| `<id>` (an object) | all its pieces | `<id>` and every `<id>.<part>` |
| `<id>.<part>` | that part's pieces | `<id>.<part>` |
| `table` | the table top | `table` |
| `<arm>` | its TCP (for `near`) | every `<arm>.<link>` |
| `<arm>.gripper` | - | the arm's two finger links |
| `robot` | - | every link of every arm |
| `agent` | its pose (UE track) | `agent` |
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from datafarm.harness.judge.geometry import ObjectShape, Piece, quat_to_matrix
from datafarm.harness.judge.trajectory import Contact, Trajectory

STILL_SPEED = 1e-3
"""A body slower than this (m/s, or joint units/s) counts as not moving."""
TIME_EPS = 1e-6
"""Slack when comparing recorded times, seconds."""


class UnknownBody(KeyError):
    """A body reference that names nothing in the scene."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Body:
    """A resolved body reference."""

    ref: str
    """The reference as written."""
    kind: Literal["object", "table", "arm", "gripper", "robot", "agent"]
    """What it names."""
    name: str = ""
    """Object id or arm name."""
    part: str | None = None
    """Part name for `<id>.<part>`."""


class Scene:
    """One trajectory plus caches; what predicates and invariants evaluate against."""

    def __init__(self, traj: Trajectory) -> None:
        self.traj = traj
        """The trajectory."""
        self._frames: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._contacts: dict[tuple[str, str], np.ndarray] = {}
        self._points: dict[tuple[str, str | None, str], np.ndarray] = {}

    # ----------------------------------------------------------------- references

    def resolve(self, ref: str) -> Body:
        """The body `ref` names; UnknownBody (with a readable message) when it names nothing."""
        traj = self.traj
        arms = set(traj.arms) | set(traj.geometry.arms)
        if ref == "table":
            return Body(ref, "table")
        if ref == "robot":
            return Body(ref, "robot")
        if ref == "agent":
            return Body(ref, "agent")
        head, _, part = ref.partition(".")
        if head in arms:
            if part == "gripper":
                return Body(ref, "gripper", head)
            if not part:
                return Body(ref, "arm", head)
            return Body(ref, "arm", head, part)
        shape = traj.geometry.shapes.get(head)
        if shape is None:
            known = sorted(traj.geometry.shapes) + sorted(arms) + ["robot", "table"]
            raise UnknownBody(f"unknown body {ref!r}: the scene has {', '.join(known)}")
        if part and part not in shape.parts():
            raise UnknownBody(f"object {head!r} ({shape.kind}) has no part {part!r}; its parts: {', '.join(shape.parts()) or 'none'}")
        return Body(ref, "object", head, part or None)

    def shape(self, body: Body) -> ObjectShape:
        """The geometry of an object body; UnknownBody for anything else."""
        if body.kind != "object":
            raise UnknownBody(f"{body.ref!r} is not an object with a shape")
        return self.traj.geometry.shapes[body.name]

    def matches(self, body: Body, name: str) -> bool:
        """True when contact body `name` is (part of) `body`."""
        if body.kind == "object":
            if body.part is not None:
                return name == body.ref
            return name == body.name or name.startswith(body.name + ".")
        if body.kind == "table":
            return name == "table"
        if body.kind == "agent":
            return name == "agent"
        if body.kind == "robot":
            return name.partition(".")[0] in self.arm_names
        if body.kind == "gripper":
            return name in self.finger_links(body.name)
        if body.part is not None:  # a named arm link
            return name == body.ref
        return name.partition(".")[0] == body.name

    @cached_property
    def arm_names(self) -> set[str]:
        """Every arm name (from the trajectory and the geometry)."""
        return set(self.traj.arms) | set(self.traj.geometry.arms)

    def finger_links(self, arm: str) -> tuple[str, ...]:
        """Contact body names of `arm`'s fingers."""
        track = self.traj.arms.get(arm)
        if track is not None and track.finger_links is not None:
            return tuple(track.finger_links)
        return (f"{arm}.link7", f"{arm}.link8")

    # ----------------------------------------------------------------- frames and points

    def object_frame(self, obj: str) -> tuple[np.ndarray, np.ndarray]:
        """(R (N, 3, 3), t (N, 3)): world_from_object per step (the rest pose for an untracked object)."""
        if obj not in self._frames:
            track = self.traj.objects.get(obj)
            n = self.traj.n_steps
            if track is not None:
                pose = track.pose
            else:
                rest = self.traj.geometry.rest_poses.get(obj)
                if rest is None:
                    raise UnknownBody(f"object {obj!r} has neither a track nor a rest pose")
                pose = np.broadcast_to(rest, (n, 7))
            self._frames[obj] = (quat_to_matrix(pose[:, 3:]), np.array(pose[:, :3]))
        return self._frames[obj]

    def joint(self, obj: str, joint: str) -> np.ndarray:
        """(N,) an articulated object's joint value (zeros when not recorded: a fixed joint at 0)."""
        values = self.traj.joint_values.get(f"{obj}.{joint}")
        return np.zeros(self.traj.n_steps) if values is None else values

    def piece_offset(self, obj: str, piece: Piece) -> np.ndarray:
        """(N, 3) displacement of a piece in its object's frame (nonzero for joint-driven pieces)."""
        if piece.joint is None:
            return np.zeros((self.traj.n_steps, 3))
        return self.joint(obj, piece.joint)[:, None] * np.asarray(piece.axis)[None, :]

    def to_world(self, obj: str, piece: Piece, local: np.ndarray) -> np.ndarray:
        """(N, P, 3) world positions of piece-frame points `local` (P, 3) at every step."""
        R, t = self.object_frame(obj)
        p = local[None, :, :] + self.piece_offset(obj, piece)[:, None, :]
        return np.matmul(p, R.transpose(0, 2, 1)) + t[:, None, :]

    def to_piece(self, obj: str, piece: Piece, world: np.ndarray) -> np.ndarray:
        """(N, P, 3) world points `world` (N, P, 3) expressed in the piece's frame, step by step."""
        R, t = self.object_frame(obj)
        local = np.matmul(world - t[:, None, :], R)
        return local - self.piece_offset(obj, piece)[:, None, :]

    def points(self, body: Body, which: Literal["hull", "surface"] = "hull") -> np.ndarray:
        """(N, P, 3) world points of an object body: its convex hulls' surfaces, or its solid's surface."""
        key = (body.name, body.part, which)
        if key not in self._points:
            shape = self.shape(body)
            chunks = [
                self.to_world(body.name, piece, piece.hull_points() if which == "hull" else piece.surface_points())
                for piece in shape.select(body.part)
            ]
            self._points[key] = np.concatenate(chunks, axis=1)
        return self._points[key]

    def bottom(self, body: Body) -> np.ndarray:
        """(N,) world z of a body's lowest point (the table top for `table`)."""
        if body.kind == "table":
            return np.full(self.traj.n_steps, self.table_top)
        return self.points(body)[..., 2].min(axis=1)

    def top(self, body: Body) -> np.ndarray:
        """(N,) world z of a body's highest point (the table top for `table`)."""
        if body.kind == "table":
            return np.full(self.traj.n_steps, self.table_top)
        return self.points(body)[..., 2].max(axis=1)

    @property
    def table_top(self) -> float:
        """World z of the table top (0 when there is no table)."""
        table = self.traj.geometry.table
        return 0.0 if table is None else table.top_z

    def origin(self, body: Body) -> np.ndarray:
        """(N, 3) world position of a body's origin: object (part) frame, arm TCP, or agent."""
        if body.kind == "object":
            R, t = self.object_frame(body.name)
            if body.part is None:
                return t
            piece = self.shape(body).select(body.part)[0]
            return t + np.einsum("nij,nj->ni", R, self.piece_offset(body.name, piece))
        if body.kind == "agent":
            track = self.traj.objects.get("agent")
            if track is None:
                raise UnknownBody("the trajectory has no `agent` track")
            return track.pose[:, :3]
        if body.kind == "arm":
            track = self.traj.arms.get(body.name)
            if track is None or track.tcp is None:
                raise UnknownBody(f"arm {body.name!r} has no recorded TCP pose")
            return track.tcp[:, :3]
        raise UnknownBody(f"{body.ref!r} has no single origin")

    def orientation(self, body: Body) -> np.ndarray:
        """(N, 3, 3) world rotation of a body (object, agent or arm TCP)."""
        if body.kind == "object":
            return self.object_frame(body.name)[0]
        if body.kind == "agent":
            track = self.traj.objects.get("agent")
            if track is None:
                raise UnknownBody("the trajectory has no `agent` track")
            return quat_to_matrix(track.pose[:, 3:])
        if body.kind == "arm":
            track = self.traj.arms.get(body.name)
            if track is None or track.tcp is None:
                raise UnknownBody(f"arm {body.name!r} has no recorded TCP pose")
            return quat_to_matrix(track.tcp[:, 3:])
        raise UnknownBody(f"{body.ref!r} has no orientation")

    def reach(self, obj: str) -> float:
        """Radius of a sphere about the object's origin that holds all its pieces at every step."""
        shape = self.traj.geometry.shapes[obj]
        return max(
            piece.outer.radius() + float(np.linalg.norm(self.piece_offset(obj, piece), axis=1).max())
            for piece in shape.pieces
        )

    def speed(self, obj: str) -> np.ndarray:
        """(N,) linear speed of a tracked object, m/s (zeros for an untracked, fixed object)."""
        track = self.traj.objects.get(obj)
        if track is None:
            return np.zeros(self.traj.n_steps)
        return np.linalg.norm(track.linear_velocity, axis=1)

    # ----------------------------------------------------------------- contacts

    @cached_property
    def _row_of_step(self) -> dict[int, int]:
        steps = self.traj.step_indices
        return {int(s): i for i, s in reversed(list(enumerate(steps)))}

    def _row(self, step: int | None, t: float) -> int:
        """Row of a control step when known, else of the latest step at or before time `t`."""
        if step is not None and step in self._row_of_step:
            return self._row_of_step[step]
        return max(0, int(np.searchsorted(self.traj.times, t + TIME_EPS, side="right")) - 1)

    def contact_span(self, c: Contact) -> tuple[int, int]:
        """[first, last) row indices a contact event covers (at least one row)."""
        start = self._row(c.start_step, c.start_t)
        end = self.traj.n_steps if c.end_t is None and c.end_step is None else self._row(c.end_step, c.end_t or c.start_t) + 1
        return start, max(start + 1, end)

    def contacts_between(self, a: Body, b: Body) -> list[Contact]:
        """Contact events between (a part of) `a` and (a part of) `b`, in either order."""
        return [
            c for c in self.traj.contacts
            if (self.matches(a, c.a) and self.matches(b, c.b)) or (self.matches(a, c.b) and self.matches(b, c.a))
        ]

    def contact_mask(self, a: Body, b: Body) -> np.ndarray:
        """(N,) True at steps where `a` and `b` touch."""
        key = (a.ref, b.ref)
        if key not in self._contacts:
            mask = np.zeros(self.traj.n_steps, bool)
            for c in self.contacts_between(a, b):
                start, end = self.contact_span(c)
                mask[start:end] = True
            self._contacts[key] = self._contacts[(b.ref, a.ref)] = mask
        return self._contacts[key]

    def contact_starts(self, a: Body, b: Body) -> np.ndarray:
        """Start times of distinct touches between `a` and `b`: overlapping or adjacent events
        (e.g. both fingers, or two links, at once) are merged into one touch."""
        spans = sorted(self.contact_span(c) for c in self.contacts_between(a, b))
        starts: list[float] = []
        last_end = -2
        for start, end in spans:
            if start > last_end:  # a step without contact separates two touches
                starts.append(float(self.traj.times[min(start, self.traj.n_steps - 1)]))
            last_end = max(last_end, end)
        return np.asarray(starts)

    def body_moving(self, name: str) -> np.ndarray:
        """(N,) True where contact body `name` moves: robot links always count; objects by their
        speed; joint-driven parts by their joint's rate too; the table never moves."""
        n = self.traj.n_steps
        head, _, part = name.partition(".")
        if head in self.arm_names:
            return np.ones(n, bool)
        shape = self.traj.geometry.shapes.get(head)
        if shape is None:
            return np.zeros(n, bool)
        moving = self.speed(head) > STILL_SPEED
        if part:
            for piece in shape.pieces:
                if piece.part == part and piece.joint is not None:
                    step = np.abs(np.diff(self.joint(head, piece.joint))) / self.traj.dt
                    rate = np.maximum(np.append(step, 0.0), np.insert(step, 0, 0.0))  # change into or out of step i
                    moving = moving | (rate > STILL_SPEED)
        return moving
