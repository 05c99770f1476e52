"""The oracle's perception detail levels and the question spans, as plain names (no imports), so a command
line can offer them as choices without loading the world code.

- ``words``: what a VLM writes (direction words, rounded distances, newly visible objects).
- ``bearings``: camera motion with its amounts, every visible object by a stable instance name with its
  bearing, distance, footprint and height, and the walls in view.
- ``map``: a cognitive map in the first key frame's frame: camera poses, object centres and footprints, walls.
- ``relations``: the map plus the facts the question needs stated outright.
"""

DETAIL_LEVELS = ("words", "bearings", "map", "relations")
SPANS = ("1", "2", "any")
