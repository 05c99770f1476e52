"""Scene -> MuJoCo MJCF XML: textured floor and walls, furniture made of box primitives.

Floors and walls carry procedural textures with random speckle marks so that ORB key points exist and
consecutive frames can be matched (the key-frame stage needs them). Each furniture object is one body
named ``obj<i>`` whose geoms fill its annotated bounding box, so segmentation maps pixels to objects
and the box in meta_info is exactly what is drawn. Shadows and MSAA are off: with them on, llvmpipe
renders ~30x slower.
"""

from __future__ import annotations

import math

import numpy as np

from embodied_r.sim.world.scenes import Scene, SceneObject

# (floor rgb1, floor rgb2, floor marks, wall rgb, wall marks) per style
_STYLES = (
    ("0.62 0.48 0.33", "0.52 0.38 0.25", "0.3 0.2 0.1", "0.86 0.84 0.78", "0.55 0.52 0.45"),
    ("0.55 0.55 0.57", "0.42 0.42 0.45", "0.9 0.9 0.9", "0.80 0.86 0.90", "0.45 0.52 0.58"),
    ("0.78 0.70 0.55", "0.66 0.58 0.44", "0.4 0.3 0.2", "0.90 0.86 0.74", "0.60 0.55 0.40"),
    ("0.40 0.45 0.55", "0.30 0.35 0.45", "0.8 0.8 0.7", "0.88 0.82 0.80", "0.58 0.48 0.46"),
)


def _f(values: np.ndarray | list[float] | tuple[float, ...]) -> str:
    return " ".join(f"{float(v):.5g}" for v in values)


def _quat_from_axes(axes: np.ndarray) -> np.ndarray:
    # Body frame columns are the box axes (the rows of normalizedAxes); standard matrix -> quaternion.
    m = axes.T
    w = math.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2, m[2, 1] - m[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2, m[0, 2] - m[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2, m[1, 0] - m[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def _parts(obj: SceneObject) -> list[tuple[np.ndarray, np.ndarray]]:
    """(centre, half-size) of each box part in the body frame; together they span the whole box."""
    hx, hy, hz = (obj.box.lengths / 2).tolist()
    upright = abs(float(obj.box.axes[2][2])) > 0.99
    shape = obj.shape if upright else "box"
    if shape == "table":
        top = 0.04 if hz > 0.3 else 0.03
        leg = min(0.04, hx / 4, hy / 4)
        parts = [(np.array([0, 0, hz - top]), np.array([hx, hy, top]))]
        for sx in (-1, 1):
            for sy in (-1, 1):
                parts.append((np.array([sx * (hx - leg), sy * (hy - leg), -top]), np.array([leg, leg, hz - top])))
        return parts
    if shape == "chair":  # seat block plus a backrest along the rear long side
        seat = hz * 0.55
        back = max(0.05, hy * 0.2)
        return [(np.array([0, 0, -hz + seat]), np.array([hx, hy, seat])),
                (np.array([0, -hy + back, seat]), np.array([hx, back, hz - seat]))]
    if shape == "bed":  # mattress plus a headboard at one end
        base = hz * 0.6
        head = min(0.06, hx / 8)
        return [(np.array([0, 0, -hz + base]), np.array([hx, hy, base])),
                (np.array([-hx + head, 0, base]), np.array([head, hy, hz - base]))]
    return [(np.zeros(3), np.array([hx, hy, hz]))]


def scene_to_mjcf(scene: Scene, width: int, height: int, shadows: bool = False, fovy: float = 60.0) -> str:
    """MJCF text for the scene; ``shadows=True`` exists only for the benchmark's baseline."""
    style = _STYLES[scene.style % len(_STYLES)]
    quality = '<quality shadowsize="4096"/>' if shadows else '<quality shadowsize="0" offsamples="0"/>'
    xs = [p[0] for p in scene.polygon]
    ys = [p[1] for p in scene.polygon]
    cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    span = max(max(xs) - min(xs), max(ys) - min(ys))
    z0 = scene.floor_z
    assets = [
        f'<texture name="floor" type="2d" builtin="checker" width="128" height="128" rgb1="{style[0]}" '
        f'rgb2="{style[1]}" mark="random" random="0.04" markrgb="{style[2]}"/>',
        f'<material name="floor" texture="floor" texrepeat="{span / 1.2:.3g} {span / 1.2:.3g}"/>',
        f'<texture name="wall" type="2d" builtin="flat" width="64" height="64" rgb1="{style[3]}" '
        f'rgb2="{style[3]}" mark="random" random="0.08" markrgb="{style[4]}"/>',
    ]
    categories = sorted({o.category for o in scene.objects})
    for i, category in enumerate(categories):
        # Plain colours: MuJoCo stretches textures on boxes into streaks; the colour names the object.
        obj = next(o for o in scene.objects if o.category == category)
        assets.append(f'<material name="m{i}" rgba="{_f(obj.rgba)}" specular="0.1"/>')
    bodies = [
        f'<light pos="{cx:.3f} {cy:.3f} {z0 + scene.height - 0.1:.3f}" dir="0 0 -1" diffuse="0.5 0.5 0.5" '
        f'castshadow="{"true" if shadows else "false"}"/>',
        f'<geom name="floor" type="plane" pos="{cx:.3f} {cy:.3f} {z0:.3f}" size="{span:.3f} {span:.3f} 0.1" '
        f'material="floor"/>',
        f'<geom name="ceiling" type="box" pos="{cx:.3f} {cy:.3f} {z0 + scene.height + 0.05:.3f}" '
        f'size="{span:.3f} {span:.3f} 0.05" rgba="0.95 0.95 0.93 1"/>',
    ]
    # Walls are one-sided planes facing into the room (planes map 2D textures without stretching).
    poly = np.asarray(scene.polygon, float)
    for k, (a, b) in enumerate(zip(poly, np.roll(poly, -1, axis=0))):
        length = float(np.linalg.norm(b - a))
        along = (b - a) / length
        inward = np.array([-along[1], along[0], 0.0])  # polygon is counter-clockwise
        axes = np.array([[-along[0], -along[1], 0.0], [0.0, 0.0, 1.0], inward])  # plane normal = local z
        mid = (a + b) / 2
        assets.append(f'<material name="wall{k}" texture="wall" '
                      f'texrepeat="{length / 1.5:.3g} {scene.height / 1.5:.3g}"/>')
        bodies.append(f'<geom name="wall{k}" type="plane" pos="{mid[0]:.4f} {mid[1]:.4f} {z0 + scene.height / 2:.4f}" '
                      f'quat="{_f(_quat_from_axes(axes))}" size="{length / 2:.4f} {scene.height / 2:.4f} 0.1" '
                      f'material="wall{k}"/>')
    for i, obj in enumerate(scene.objects):
        mat = f"m{categories.index(obj.category)}"
        bodies.append(f'<body name="obj{i}" pos="{_f(obj.box.centroid)}" quat="{_f(_quat_from_axes(obj.box.axes))}">')
        for center, half in _parts(obj):
            bodies.append(f'<geom type="box" pos="{_f(center)}" size="{_f(half)}" material="{mat}"/>')
        bodies.append("</body>")
    head = [
        f'<mujoco model="{scene.name}">',
        f'<visual>{quality}<global fovy="{fovy}" offwidth="{width}" offheight="{height}"/>',
        '<headlight ambient="0.35 0.35 0.35" diffuse="0.45 0.45 0.45" specular="0 0 0"/>'
        '<map znear="0.01" zfar="50"/></visual>',
    ]
    return "\n".join(head + ["<asset>", *assets, "</asset><worldbody>", *bodies, "</worldbody></mujoco>"])
