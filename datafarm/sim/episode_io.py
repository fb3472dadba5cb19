"""Storing a recorded episode: Parquet data files (pyarrow) plus the episode record `episode.json`, and
reading them back.

Files (paths from `EpisodeRecord.files`, relative to the episode folder; defaults shown):

| file | rows | columns (the row model's fields, `datafarm.artifacts.episode`) |
| --- | --- | --- |
| `data/actions.parquet` | one per control step | `step` int64, `time_s` double, `joint_targets` list<double> (action_space.joints order, radians), `gripper_targets` list<double> (action_space.grippers order, metres between the fingers) |
| `data/states.parquet` | one per control step | `step`, `time_s`, `objects` list<struct<id string, pose struct<position list<double>, quaternion list<double>>, linear_velocity list<double>, angular_velocity list<double>>> (G order), `joint_positions`, `joint_velocities`, `joint_efforts` list<double> (joints order), `gripper_openings` list<double>, `end_effectors` list<struct<position, quaternion>> (grippers order), `scale_readings` map<string, double> (grams), `joint_values` map<string, double> |
| `contacts.parquet` | one per contact event | `a`, `b` string, `start_step` int64, `end_step` int64 (null: still touching at the end), `start_s` double, `end_s` double (nullable), `max_impulse` double (N s), `max_penetration` double (m) |
| `data/joint_occupancy.parquet` | one per joint (arm joints, then `<arm>.gripper`) | `joint` string, `max_position_fraction`, `max_velocity_fraction`, `max_effort_fraction` double, `actions_over_limit` int64, `first_over_limit_step` int64 (nullable) |

Lists are per row (not flattened into `left.q0`-style columns), exactly as the row models nest them,
so `ArmStateRow.model_validate(row)` reads a row; quaternions are (w, x, y, z). Every column carries
its row-model description in the field metadata (`description`); each table's schema metadata names
the row model (`datafarm.row_model`) and, for the states, the physics timestep and substeps.
Time `time_s` is `step / control_hz`. Frame i of every rendered video is control step i.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.episode import (
    ArmStateRow,
    ContactEvent,
    EpisodeRecord,
    JointOccupancy,
    JointTargetRow,
    JointTargetSpace,
    ObjectState,
)
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeVerdict
from datafarm.artifacts.sampler import Variation
from datafarm.errors import InputError, Problem
from datafarm.sim.recording import OBJECT_STATE, Recording

EPISODE_JSON = "episode.json"
"""The episode record's file name inside the episode folder."""

_F64 = pa.float64()
_LIST = pa.list_(_F64)
_POSE = pa.struct([pa.field("position", _LIST), pa.field("quaternion", _LIST)])


def _doc(model: type[Artifact], name: str) -> dict[bytes, bytes]:
    info = model.model_fields[name]
    return {b"description": (info.description or "").encode()}


def _field(model: type[Artifact], name: str, dtype: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, dtype, nullable=nullable, metadata=_doc(model, name))


def _lists(values: np.ndarray) -> pa.ListArray:
    """(rows, n) -> one list<double> per row (n may be 0)."""
    rows = values.shape[0]
    n = int(np.prod(values.shape[1:])) if values.ndim > 1 else 1
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * n)
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(values, dtype=np.float64).reshape(-1)))


def _poses(values: np.ndarray) -> pa.StructArray:
    """(k, 7) -> k pose structs (position = first 3, quaternion = last 4)."""
    return pa.StructArray.from_arrays([_lists(values[:, :3]), _lists(values[:, 3:7])], fields=list(_POSE))


def _nested(values: pa.Array, rows: int, per_row: int) -> pa.ListArray:
    """`values` (rows * per_row entries) as one list of `per_row` entries per row."""
    return pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * per_row), values)


def _map(names: list[str], values: np.ndarray) -> pa.MapArray:
    """(rows, len(names)) -> one map<string, double> per row, keys in `names` order."""
    rows = values.shape[0]
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * len(names))
    keys = pa.array(names * rows, type=pa.string())
    return pa.MapArray.from_arrays(offsets, keys, pa.array(values.reshape(-1), type=_F64))


def _meta(model: type[Artifact], **extra: object) -> dict[bytes, bytes]:
    meta = {b"datafarm.row_model": model.__name__.encode()}
    meta.update({f"datafarm.{k}".encode(): json.dumps(v).encode() for k, v in extra.items()})
    return meta


# --- recording -> tables ------------------------------------------------------------------------------


def recording_tables(recording: Recording) -> dict[str, pa.Table]:
    """The four data tables of a recording: `actions`, `states`, `contacts`, `joint_occupancy`."""
    steps = recording.steps
    step = pa.array(np.arange(steps, dtype=np.int64))
    time = pa.array(recording.time_s)
    space = {"joints": recording.joints, "grippers": recording.grippers}

    action_schema = pa.schema([
        _field(JointTargetRow, "step", pa.int64()), _field(JointTargetRow, "time_s", _F64),
        _field(JointTargetRow, "joint_targets", _LIST), _field(JointTargetRow, "gripper_targets", _LIST),
    ], metadata=_meta(JointTargetRow, **space))
    actions = pa.Table.from_arrays(
        [step, time, _lists(recording.joint_targets), _lists(recording.gripper_targets)], schema=action_schema)

    n_obj = len(recording.object_ids)
    flat = recording.objects.reshape(steps * n_obj, OBJECT_STATE)
    object_struct = pa.StructArray.from_arrays(
        [pa.array(recording.object_ids * steps, type=pa.string()), _poses(flat[:, :7]), _lists(flat[:, 7:10]),
         _lists(flat[:, 10:13])],
        fields=[pa.field("id", pa.string()), pa.field("pose", _POSE), pa.field("linear_velocity", _LIST),
                pa.field("angular_velocity", _LIST)])
    n_grip = len(recording.grippers)
    tcp = _poses(recording.end_effectors.reshape(steps * n_grip, 7))
    state_schema = pa.schema([
        _field(ArmStateRow, "step", pa.int64()), _field(ArmStateRow, "time_s", _F64),
        _field(ArmStateRow, "objects", pa.list_(object_struct.type)),
        _field(ArmStateRow, "joint_positions", _LIST), _field(ArmStateRow, "joint_velocities", _LIST),
        _field(ArmStateRow, "joint_efforts", _LIST), _field(ArmStateRow, "gripper_openings", _LIST),
        _field(ArmStateRow, "end_effectors", pa.list_(_POSE)),
        _field(ArmStateRow, "scale_readings", pa.map_(pa.string(), _F64)),
        _field(ArmStateRow, "joint_values", pa.map_(pa.string(), _F64)),
    ], metadata=_meta(ArmStateRow, **space, timestep=recording.timestep, substeps=recording.substeps,
                      control_hz=recording.control_hz))
    states = pa.Table.from_arrays([
        step, time, _nested(object_struct, steps, n_obj), _lists(recording.joint_positions),
        _lists(recording.joint_velocities), _lists(recording.joint_efforts), _lists(recording.gripper_openings),
        _nested(tcp, steps, n_grip), _map(recording.scale_ids, recording.scale_readings),
        _map(recording.joint_value_names, recording.joint_values),
    ], schema=state_schema)

    return {"actions": actions, "states": states,
            "contacts": _model_table(ContactEvent, recording.contacts, {
                "a": pa.string(), "b": pa.string(), "start_step": pa.int64(), "end_step": pa.int64(),
                "start_s": _F64, "end_s": _F64, "max_impulse": _F64, "max_penetration": _F64},
                nullable={"end_step", "end_s"}),
            "joint_occupancy": _model_table(JointOccupancy, recording.occupancy, {
                "joint": pa.string(), "max_position_fraction": _F64, "max_velocity_fraction": _F64,
                "max_effort_fraction": _F64, "actions_over_limit": pa.int64(), "first_over_limit_step": pa.int64()},
                nullable={"first_over_limit_step"})}


def _model_table(model: type[Artifact], rows: list[Artifact], types: dict[str, pa.DataType],
                 nullable: set[str]) -> pa.Table:
    """A table with one row per model instance; columns = the model's fields, in field order."""
    if list(types) != list(model.model_fields):
        raise RuntimeError(f"{model.__name__} fields changed: {list(model.model_fields)}")
    schema = pa.schema([_field(model, name, t, nullable=name in nullable) for name, t in types.items()],
                       metadata=_meta(model))
    data = [r.model_dump(mode="json") for r in rows]
    return pa.Table.from_pylist(data, schema=schema)


# --- writing and reading ------------------------------------------------------------------------------


def make_record(recording: Recording, *, episode_id: str, robot: str, variation: Variation, verdict: JudgeVerdict,
                expert_sha256: str, backend: str = "sapien") -> EpisodeRecord:
    """The episode record for `recording` (default file paths)."""
    return EpisodeRecord(episode_id=episode_id, backend=backend, robot=robot, action_space=recording.action_space(),
                         control_hz=recording.control_hz, steps=recording.steps, variation=variation,
                         verdict=verdict, expert_sha256=expert_sha256)


def _check_record(record: EpisodeRecord, recording: Recording) -> None:
    space = record.action_space
    problems = []
    if not isinstance(space, JointTargetSpace):
        problems.append("the record's action space is not joint-targets")
    elif list(space.joints) != recording.joints or list(space.grippers) != recording.grippers:
        problems.append(f"the record's joints/grippers {space.joints}/{space.grippers} differ from the recording's "
                        f"{recording.joints}/{recording.grippers}")
    if record.steps != recording.steps:
        problems.append(f"the record says {record.steps} steps, the recording has {recording.steps}")
    if abs(record.control_hz - recording.control_hz) > 1e-9:
        problems.append(f"the record says {record.control_hz} Hz, the recording ran at {recording.control_hz} Hz")
    if problems:
        raise ValueError("; ".join(problems))


def _write_table(table: pa.Table, path: Path) -> None:
    """Write atomically (a temporary sibling renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_episode(folder: Path | str, record: EpisodeRecord, recording: Recording) -> dict[str, Path]:
    """Write `recording`'s data files where `record.files` says, then `episode.json`; returns the paths
    by name (`actions`, `states`, `contacts`, `joint_occupancy`, `record`). ValueError when the record
    does not describe the recording (steps, rate, joint order)."""
    _check_record(record, recording)
    folder = Path(folder)
    tables = recording_tables(recording)
    out: dict[str, Path] = {}
    for name, table in tables.items():
        relative = getattr(record.files, name)
        if relative is None:
            continue
        out[name] = folder / relative
        _write_table(table, out[name])
    out["record"] = save_artifact(record, folder / EPISODE_JSON)
    return out


@dataclass
class StoredEpisode:
    """An episode read back from its folder: the record, the raw tables, and the arrays."""

    record: EpisodeRecord
    """episode.json."""
    tables: dict[str, pa.Table]
    """`actions`, `states`, `contacts`, `joint_occupancy` as read."""
    recording: Recording
    """The same arrays, events and occupancy a `Recorder` produced."""

    def action_rows(self) -> list[JointTargetRow]:
        """The action file as validated row models."""
        return [JointTargetRow.model_validate(r) for r in self.tables["actions"].to_pylist()]

    def state_rows(self) -> list[ArmStateRow]:
        """The state file as validated row models."""
        rows = []
        for r in self.tables["states"].to_pylist():
            r["scale_readings"] = dict(r["scale_readings"])
            r["joint_values"] = dict(r["joint_values"])
            r["objects"] = [ObjectState.model_validate(o) for o in r["objects"]]
            rows.append(ArmStateRow.model_validate(r))
        return rows


def _column(table: pa.Table, name: str, width: int) -> np.ndarray:
    """A list<double> column as a (rows, width) float64 array."""
    values = table.column(name).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float64).reshape(table.num_rows, width)


def _pose_column(structs: pa.Array, rows: int, per_row: int) -> np.ndarray:
    """Pose structs (rows * per_row) as a (rows, per_row, 7) array."""
    position = structs.field("position").flatten().to_numpy(zero_copy_only=False)
    quaternion = structs.field("quaternion").flatten().to_numpy(zero_copy_only=False)
    return np.concatenate([position.reshape(-1, 3), quaternion.reshape(-1, 4)], axis=1).reshape(rows, per_row, 7)


def read_episode(folder: Path | str) -> StoredEpisode:
    """Read an episode folder written by `write_episode` (InputError naming a missing or unreadable file)."""
    folder = Path(folder)
    record = load_artifact(EpisodeRecord, folder / EPISODE_JSON)
    tables: dict[str, pa.Table] = {}
    for name in ("actions", "states", "contacts", "joint_occupancy"):
        relative = getattr(record.files, name)
        path = folder / relative
        try:
            tables[name] = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as err:
            raise InputError([Problem(f"cannot read episode data: {err}", file=path)]) from None
    space = record.action_space
    if not isinstance(space, JointTargetSpace):
        raise InputError([Problem("only joint-targets episodes are stored by datafarm.sim", file=folder / EPISODE_JSON,
                                  field="action_space.kind")])
    actions, states = tables["actions"], tables["states"]
    steps, nj, ng = states.num_rows, len(space.joints), len(space.grippers)
    if actions.num_rows != record.steps or steps != record.steps:
        raise InputError([Problem(f"episode.json says {record.steps} steps; actions have {actions.num_rows} rows, "
                                  f"states {steps}", file=folder / EPISODE_JSON, field="steps")])
    meta = states.schema.metadata or {}
    objects = states.column("objects").combine_chunks()
    per_step = len(objects[0]) if steps else 0
    structs = objects.flatten()
    object_ids = [str(v) for v in structs.field("id").to_pylist()[:per_step]]
    poses = _pose_column(structs.field("pose"), steps, per_step)
    lin = structs.field("linear_velocity").flatten().to_numpy(zero_copy_only=False).reshape(steps, per_step, 3)
    ang = structs.field("angular_velocity").flatten().to_numpy(zero_copy_only=False).reshape(steps, per_step, 3)
    scale_ids, scale = _map_column(states, "scale_readings")
    joint_names, joint_values = _map_column(states, "joint_values")
    recording = Recording(
        control_hz=record.control_hz, timestep=float(json.loads(meta.get(b"datafarm.timestep", b"0"))),
        substeps=int(json.loads(meta.get(b"datafarm.substeps", b"0"))), joints=list(space.joints),
        grippers=list(space.grippers), object_ids=object_ids, scale_ids=scale_ids, joint_value_names=joint_names,
        joint_targets=_column(actions, "joint_targets", nj), gripper_targets=_column(actions, "gripper_targets", ng),
        joint_positions=_column(states, "joint_positions", nj), joint_velocities=_column(states, "joint_velocities", nj),
        joint_efforts=_column(states, "joint_efforts", nj), gripper_openings=_column(states, "gripper_openings", ng),
        end_effectors=_pose_column(states.column("end_effectors").combine_chunks().flatten(), steps, ng),
        objects=np.concatenate([poses, lin, ang], axis=2), scale_readings=scale, joint_values=joint_values,
        contacts=[ContactEvent.model_validate(r) for r in tables["contacts"].to_pylist()],
        occupancy=[JointOccupancy.model_validate(r) for r in tables["joint_occupancy"].to_pylist()])
    return StoredEpisode(record, tables, recording)


def _map_column(table: pa.Table, name: str) -> tuple[list[str], np.ndarray]:
    """A map<string, double> column with the same keys in every row -> (keys, (rows, keys) array)."""
    column = table.column(name).combine_chunks()
    rows = table.num_rows
    keys = column.keys.to_pylist()
    per_row = len(keys) // rows if rows else 0
    values = column.items.to_numpy(zero_copy_only=False).reshape(rows, per_row)
    return [str(k) for k in keys[:per_row]], np.asarray(values, dtype=np.float64)
