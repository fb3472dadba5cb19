"""Set dressing for a studio render: what a real room adds around G's bodies. Textured table top and
legs, floor and walls, the printed ChArUco board, the scales' LCD readouts, and the lights.

All of it is visual only (no collision shapes), added to a render-enabled world built from the
scene's exact grounding (`datafarm.sim.world.build_world(..., render=True)`), so the physics bodies
and their poses are G's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sapien

from datafarm.sim.world import World
from datafarm.sim.world.frames import pose_to_matrix, to_sapien
from datafarm.studio import textures
from datafarm.studio.board import (
    PIXELS_PER_SQUARE,
    board_image,
    margin_pixels,
    world_from_board,
)
from datafarm.studio.scene import BoardSetup, Lighting, Room, SceneSpec, TableSetup

TABLE_TOP_LIFT = 0.0002
"""The textured top sits this far above the slab (metres), covering its plain visual."""
TABLE_TILE = 0.6
"""Metres of table covered by one repeat of its texture."""
FLOOR_TILE = 1.5
"""Metres of floor covered by one repeat of its texture."""
LEG_SIDE = 0.05
"""Side of a square table leg, metres."""
WALL_HEIGHT = 2.6
"""Height of the walls above the floor, metres."""


def _texture(image: np.ndarray, mipmaps: int = 6) -> sapien.render.RenderTexture2D:
    """A repeating colour texture from a float RGB image in 0-1 (values used as given, like a plain
    base colour, so a texture's mean matches the colour it was made from). Mipmaps keep fine
    patterns from shimmering but blur them at grazing angles (no anisotropic filtering)."""
    rgba = np.concatenate([np.clip(image, 0, 1), np.ones(image.shape[:2] + (1,), np.float32)], axis=2)
    data = np.ascontiguousarray((rgba * 255.0 + 0.5).astype(np.uint8))
    return sapien.render.RenderTexture2D(data, "R8G8B8A8Unorm", mipmap_levels=mipmaps, filter_mode="linear",
                                         address_mode="repeat")


def _material(image: np.ndarray | None = None, colour: Sequence[float] = (1.0, 1.0, 1.0), roughness: float = 0.8,
              specular: float = 0.2, emission: np.ndarray | None = None, mipmaps: int = 6) -> sapien.render.RenderMaterial:
    material = sapien.render.RenderMaterial(base_color=[*colour, 1.0], roughness=roughness, specular=specular)
    if image is not None:
        material.base_color_texture = _texture(image, mipmaps)
    if emission is not None:
        material.emission = [1.0, 1.0, 1.0, 2.0]  # (r, g, b, strength): a lit display reads in daylight
        material.emission_texture = _texture(emission)
    return material


def quad(corners: np.ndarray, uvs: np.ndarray, normal: Sequence[float],
         material: sapien.render.RenderMaterial) -> sapien.render.RenderShapeTriangleMesh:
    """A flat four-corner mesh (corners in order around it) facing `normal`, with texture coordinates."""
    corners = np.asarray(corners, np.float32)
    n = np.asarray(normal, np.float32) / np.linalg.norm(normal)
    faces = np.array([[0, 1, 2], [0, 2, 3]], np.uint32)
    if np.dot(np.cross(corners[1] - corners[0], corners[2] - corners[0]), n) < 0:
        faces = faces[:, ::-1].copy()
    return sapien.render.RenderShapeTriangleMesh(corners, faces, np.tile(n, (4, 1)), np.asarray(uvs, np.float32), material)


def add_visual(scene: sapien.Scene, name: str, shapes: Sequence[object], pose: sapien.Pose | None = None) -> sapien.Entity:
    """A static, visual-only entity made of render shapes."""
    body = sapien.render.RenderBodyComponent()
    for shape in shapes:
        body.attach(shape)
    entity = sapien.Entity()
    entity.set_name(name)
    entity.add_component(body)
    entity.set_pose(pose or sapien.Pose())
    scene.add_entity(entity)
    return entity


def _plane(sx: float, sy: float, z: float, tile: float, material: sapien.render.RenderMaterial,
           center: Sequence[float] = (0.0, 0.0)) -> sapien.render.RenderShapeTriangleMesh:
    """A horizontal rectangle facing up, its texture repeating every `tile` metres."""
    cx, cy = center
    corners = np.array([[cx - sx / 2, cy - sy / 2, z], [cx + sx / 2, cy - sy / 2, z],
                        [cx + sx / 2, cy + sy / 2, z], [cx - sx / 2, cy + sy / 2, z]])
    uvs = np.array([[0, 0], [sx / tile, 0], [sx / tile, sy / tile], [0, sy / tile]])
    return quad(corners, uvs, (0, 0, 1), material)


def dress_table(scene: sapien.Scene, table: TableSetup, rng: np.random.Generator) -> None:
    """The textured top over the slab, and four legs down to the floor."""
    top = textures.table_texture(table.texture, rng, table.colour)
    add_visual(scene, "table_surface", [_plane(table.size_x, table.size_y, TABLE_TOP_LIFT, TABLE_TILE,
                                               _material(top, roughness=0.6, specular=0.3), table.center)])
    leg_material = _material(colour=[c * 0.6 for c in table.colour], roughness=0.7)
    legs = []
    for sx in (-1, 1):
        for sy in (-1, 1):
            x = table.center[0] + sx * (table.size_x / 2 - LEG_SIDE)
            y = table.center[1] + sy * (table.size_y / 2 - LEG_SIDE)
            shape = sapien.render.RenderShapeBox(np.array([LEG_SIDE / 2, LEG_SIDE / 2, table.height / 2], np.float32),
                                                 leg_material)
            shape.local_pose = sapien.Pose([x, y, -table.height / 2])
            legs.append(shape)
    add_visual(scene, "table_legs", legs)


def dress_room(scene: sapien.Scene, room: Room, table: TableSetup, rng: np.random.Generator) -> None:
    """A floor under the table and four walls around it."""
    floor_z = -table.height + 0.001
    d = room.wall_distance
    floor = _material(textures.floor_planks(rng, room.floor_colour), roughness=0.7, specular=0.2)
    add_visual(scene, "floor", [_plane(2 * d, 2 * d, floor_z, FLOOR_TILE, floor, table.center)])
    wall = _material(textures.plaster(rng, room.wall_colour), roughness=0.95, specular=0.05)
    cx, cy = table.center
    top = floor_z + WALL_HEIGHT
    walls = []
    for axis, sign in ((0, 1), (0, -1), (1, 1), (1, -1)):
        normal = np.zeros(3)
        normal[axis] = -sign  # facing the table
        if axis == 0:
            x = cx + sign * d
            corners = [[x, cy - d, floor_z], [x, cy + d, floor_z], [x, cy + d, top], [x, cy - d, top]]
        else:
            y = cy + sign * d
            corners = [[cx - d, y, floor_z], [cx + d, y, floor_z], [cx + d, y, top], [cx - d, y, top]]
        uvs = np.array([[0, 1], [2 * d / FLOOR_TILE, 1], [2 * d / FLOOR_TILE, 0], [0, 0]]) * [1, WALL_HEIGHT / FLOOR_TILE]
        walls.append(quad(np.array(corners), uvs, normal, wall))
    add_visual(scene, "walls", walls)


def dress_board(scene: sapien.Scene, setup: BoardSetup) -> None:
    """The printed ChArUco board, lying face up (its texture exactly at the board frame's coordinates)."""
    image = board_image(setup).astype(np.float32) / 255.0
    paper = np.repeat(image[..., None], 3, axis=2) * np.array([0.96, 0.96, 0.94], np.float32)
    nx, ny = setup.squares
    # the margin as printed: whole texture pixels, so the squares land exactly where the board frame says
    m = margin_pixels(setup) / PIXELS_PER_SQUARE * setup.square_length
    w, h = nx * setup.square_length, ny * setup.square_length
    # texture (u, v) = (0, 0) is the image's first pixel; image rows run along the board's y
    corners = np.array([[-m, -m, 0], [w + m, -m, 0], [w + m, h + m, 0], [-m, h + m, 0]])
    uvs = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    # no mipmaps: a printed pattern must stay sharp at grazing angles, as it does on a real sensor
    material = _material(paper, roughness=0.9, specular=0.1, mipmaps=1)
    add_visual(scene, "charuco_board", [quad(corners, uvs, (0, 0, -1), material)], to_sapien(world_from_board(setup)))


def dress_scale_displays(scene: sapien.Scene, world: World) -> None:
    """Each scale's readout, lit and showing zero (nothing rests on the plate in a calibration clip)."""
    for obj in world.grounding.objects:
        if obj.kind != "scale":
            continue
        display = obj.display
        zero = "0." + "0" * display.decimals if display.decimals else "0"
        readout = textures.lcd_readout(f"{zero} {display.unit}")
        w, h = display.width, display.height
        corners = np.array([[-w / 2, h / 2, 0.001], [w / 2, h / 2, 0.001], [w / 2, -h / 2, 0.001], [-w / 2, -h / 2, 0.001]])
        uvs = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])  # image rows go down the display's -y
        material = _material(readout * 0.2, roughness=0.2, specular=0.6, emission=readout)
        pose = pose_to_matrix(obj.pose) @ pose_to_matrix(display.pose)
        add_visual(scene, f"{obj.id}_display", [quad(corners, uvs, (0, 0, 1), material)], to_sapien(pose))


@dataclass
class LightRig:
    """The scene's lights and their nominal colours, so their intensity can drift over the clip."""

    scene: sapien.Scene
    ambient: np.ndarray
    lights: list[tuple[sapien.render.RenderDirectionalLightComponent, np.ndarray]]

    def set_level(self, level: float) -> None:
        """Scale every light (ambient included) by `level` (1 = nominal)."""
        self.scene.set_ambient_light((self.ambient * level).tolist())
        for light, colour in self.lights:
            light.set_color((colour * level).tolist())


def add_lights(scene: sapien.Scene, lighting: Lighting) -> LightRig:
    """Ambient light, the key light (with shadows when asked) and a soft fill from the other side."""
    ambient = np.full(3, lighting.ambient, np.float32)
    scene.set_ambient_light(ambient.tolist())
    key_colour = np.asarray(lighting.key_colour, np.float32) * lighting.key_intensity
    key = scene.add_directional_light(list(lighting.key_direction), key_colour.tolist(), shadow=lighting.shadows,
                                      shadow_scale=2.0, shadow_near=-5.0, shadow_far=5.0, shadow_map_size=1024)
    direction = np.asarray(lighting.key_direction, np.float64)
    fill_direction = [-direction[0], -direction[1], direction[2]]
    fill_colour = np.full(3, lighting.fill_intensity, np.float32)
    fill = scene.add_directional_light(fill_direction, fill_colour.tolist(), shadow=False)
    return LightRig(scene, ambient, [(key, key_colour), (fill, fill_colour)])


def dress(world: World, scene_spec: SceneSpec, rng: np.random.Generator) -> LightRig:
    """Everything above, added to `world`'s render-enabled scene; returns the lights."""
    scene = world.scene
    dress_table(scene, scene_spec.table, rng)
    dress_room(scene, scene_spec.room, scene_spec.table, rng)
    if scene_spec.board is not None:
        dress_board(scene, scene_spec.board)
    dress_scale_displays(scene, world)
    return add_lights(scene, scene_spec.lighting)
