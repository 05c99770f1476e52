"""Furniture vocabulary for procedural rooms: sizes, placement and looks per category.

Sizes are the medians of VSI-Bench's released scene annotations (``data/meta_info``, 288 scenes):
footprint long side ``length``, short side ``width`` and ``height`` in metres, plus the median height
of the box bottom above the floor for wall-mounted things. Sampled sizes jitter around them by
``SIZE_JITTER`` so that size questions have varied answers but stay realistic.

``placement`` says where an object goes:
- ``floor``: stands on the floor anywhere with free space around it;
- ``wall``: stands on the floor with its back flush against a wall (bed, bookshelf, refrigerator...);
- ``mounted``: hangs on a wall at ``elevation`` above the floor (window, tv, whiteboard, door at 0).

``OOD_CATEGORIES`` is a second, separate table for the out-of-distribution world (``synth world --ood``):
categories the in-distribution sampler never draws, whose names share no word with an ID name (so a
question about "the desk" cannot be answered by pattern-matching an ID category). Their sizes are
typical furniture-catalogue dimensions, not VSI-Bench medians (VSI-Bench has no annotations for most
of them), and ``weight`` is only their relative frequency within that table.
"""

from __future__ import annotations

from dataclasses import dataclass

SIZE_JITTER = 0.15  # +-15 % uniform around the median; keeps categories recognisable by size


@dataclass(frozen=True)
class Category:
    name: str
    length: float
    width: float
    height: float
    placement: str  # "floor" | "wall" | "mounted"
    elevation: float  # box bottom above the floor (m); 0 for floor/wall objects
    color_name: str
    rgba: tuple[float, float, float, float]
    shape: str  # "box" | "table" | "chair" | "bed": which primitive parts make up the object
    max_count: int  # most instances of this category in one procedural room
    weight: float  # relative frequency (number of VSI-Bench scenes containing it)


def _c(name: str, length: float, width: float, height: float, placement: str, elevation: float,
       color_name: str, rgb: tuple[float, float, float], shape: str, max_count: int, weight: float) -> Category:
    return Category(name, length, width, height, placement, elevation, color_name, (*rgb, 1.0), shape,
                    max_count, weight)


# name, L, W, H, placement, elevation, colour, rgb, shape, max count, weight (scenes in VSI-Bench)
CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in (
        _c("table", 1.20, 0.68, 0.75, "floor", 0.0, "brown", (0.55, 0.36, 0.20), "table", 3, 181),
        _c("chair", 0.58, 0.48, 0.86, "floor", 0.0, "red", (0.75, 0.18, 0.15), "chair", 6, 164),
        _c("door", 0.96, 0.10, 2.03, "mounted", 0.0, "white", (0.92, 0.92, 0.88), "box", 2, 115),
        _c("tv", 0.93, 0.08, 0.57, "mounted", 0.9, "black", (0.06, 0.06, 0.07), "box", 1, 86),
        _c("sofa", 1.82, 0.92, 0.83, "wall", 0.0, "blue", (0.18, 0.30, 0.70), "chair", 2, 84),
        _c("bed", 2.05, 1.50, 0.62, "wall", 0.0, "beige", (0.85, 0.78, 0.62), "bed", 1, 72),
        _c("trash bin", 0.42, 0.32, 0.46, "floor", 0.0, "green", (0.15, 0.55, 0.25), "box", 3, 54),
        _c("window", 1.15, 0.12, 1.21, "mounted", 0.9, "light blue", (0.55, 0.78, 0.95), "box", 3, 52),
        _c("refrigerator", 0.70, 0.62, 1.66, "wall", 0.0, "silver", (0.75, 0.76, 0.78), "box", 1, 43),
        _c("stool", 0.42, 0.38, 0.45, "floor", 0.0, "orange", (0.90, 0.50, 0.12), "table", 4, 40),
        _c("toilet", 0.63, 0.40, 0.75, "wall", 0.0, "white", (0.96, 0.96, 0.96), "box", 1, 39),
        _c("backpack", 0.45, 0.30, 0.55, "floor", 0.0, "purple", (0.45, 0.20, 0.60), "box", 2, 29),
        _c("bathtub", 1.65, 0.71, 0.57, "wall", 0.0, "cream", (0.93, 0.90, 0.80), "box", 1, 28),
        _c("washer", 0.64, 0.60, 0.86, "wall", 0.0, "grey", (0.60, 0.60, 0.62), "box", 1, 24),
        _c("heater", 1.10, 0.15, 0.50, "mounted", 0.12, "yellow", (0.90, 0.80, 0.20), "box", 2, 23),
        _c("bookshelf", 1.00, 0.38, 1.95, "wall", 0.0, "dark brown", (0.35, 0.22, 0.12), "box", 2, 19),
        _c("mirror", 0.80, 0.06, 0.93, "mounted", 1.0, "silver", (0.80, 0.85, 0.88), "box", 1, 19),
        _c("fireplace", 1.55, 0.60, 1.20, "wall", 0.0, "dark grey", (0.25, 0.25, 0.27), "box", 1, 18),
        _c("lamp", 0.40, 0.35, 1.40, "floor", 0.0, "yellow", (0.95, 0.85, 0.35), "box", 2, 18),
        _c("whiteboard", 1.80, 0.06, 1.20, "mounted", 0.9, "white", (0.97, 0.97, 0.97), "box", 1, 17),
        _c("plant", 0.40, 0.40, 0.80, "floor", 0.0, "green", (0.20, 0.60, 0.20), "box", 3, 13),
        _c("nightstand", 0.55, 0.45, 0.60, "wall", 0.0, "brown", (0.50, 0.32, 0.18), "box", 2, 11),
        _c("dishwasher", 0.64, 0.62, 0.88, "wall", 0.0, "grey", (0.55, 0.56, 0.58), "box", 1, 7),
        _c("closet", 0.95, 0.55, 1.90, "wall", 0.0, "tan", (0.78, 0.65, 0.45), "box", 1, 5),
    )
}


# Out-of-distribution vocabulary: never drawn by the default (ID) layout sampler, whose table above stays
# untouched so that ID worlds are identical to those made before this table existed.
OOD_CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in (
        _c("desk", 1.20, 0.60, 0.75, "wall", 0.0, "light grey", (0.78, 0.78, 0.76), "table", 2, 10),
        _c("cabinet", 0.80, 0.45, 0.90, "wall", 0.0, "cherry", (0.55, 0.16, 0.12), "box", 3, 10),
        _c("suitcase", 0.45, 0.28, 0.68, "floor", 0.0, "turquoise", (0.10, 0.70, 0.70), "box", 3, 8),
        _c("guitar", 0.40, 0.35, 1.05, "floor", 0.0, "amber", (0.85, 0.55, 0.10), "box", 2, 6),
        _c("bench", 1.20, 0.38, 0.46, "floor", 0.0, "walnut", (0.42, 0.28, 0.16), "table", 2, 8),
        _c("piano", 1.50, 0.60, 1.25, "wall", 0.0, "glossy black", (0.03, 0.03, 0.04), "box", 1, 6),
        _c("dresser", 1.20, 0.50, 0.85, "wall", 0.0, "ivory", (0.95, 0.93, 0.84), "box", 1, 8),
        _c("sink", 0.55, 0.45, 0.20, "mounted", 0.80, "porcelain", (0.90, 0.92, 0.95), "box", 1, 6),
    )
}
ALL_CATEGORIES: dict[str, Category] = {**CATEGORIES, **OOD_CATEGORIES}


class UnknownCategoryError(ValueError):
    """A category name that is not in the procedural vocabulary."""


def get_category(name: str) -> Category:
    """Look up a category (ID or OOD table); unknown names raise with the list of known ones."""
    try:
        return ALL_CATEGORIES[name]
    except KeyError:
        raise UnknownCategoryError(
            f"unknown object category {name!r}; known categories: {', '.join(sorted(ALL_CATEGORIES))}"
        ) from None


def find_category(name: str) -> Category | None:
    """The table entry of an ID or OOD category, or None for names outside both tables."""
    return ALL_CATEGORIES.get(name)


def is_ood(name: str) -> bool:
    """Whether ``name`` is one of the out-of-distribution categories."""
    return name in OOD_CATEGORIES


def color_for(name: str) -> tuple[str, tuple[float, float, float, float]]:
    """Colour name and RGBA for any category, including ones outside the vocabulary (real meta_info
    scenes have 65 categories): known ones (ID or OOD) use their table entry, others a stable hashed grey-tone."""
    cat = ALL_CATEGORIES.get(name)
    if cat is not None:
        return cat.color_name, cat.rgba
    # A stable (not Python-hash-randomised) mix of the name's bytes picks one of a few named colours.
    palette = (
        ("teal", (0.10, 0.55, 0.55)), ("olive", (0.50, 0.50, 0.15)), ("pink", (0.90, 0.55, 0.65)),
        ("navy", (0.12, 0.15, 0.45)), ("maroon", (0.50, 0.10, 0.15)), ("lime", (0.55, 0.85, 0.25)),
    )
    index = sum((i + 1) * b for i, b in enumerate(name.encode("utf-8"))) % len(palette)
    color_name, rgb = palette[index]
    return color_name, (*rgb, 1.0)
