"""The oracle's perception detail levels, the question spans and the world's task types, as plain names (no
imports), so a command line can offer them as choices without loading the world code.

- ``words``: what a VLM writes (direction words, rounded distances, newly visible objects).
- ``bearings``: camera motion with its amounts, every visible object by a stable instance name with its
  bearing, distance, footprint and height, and the walls in view.
- ``map``: a cognitive map in the first key frame's frame: camera poses, object centres and footprints, walls.
- ``relations``: the map plus the facts the question needs stated outright.
- ``facts``: the motion and the names in view per key frame, and the facts the question needs (no map):
  the easiest and shortest level (on the 300-room ladder world, 40 % of ``relations``' characters).
"""

DETAIL_LEVELS = ("words", "bearings", "map", "relations", "facts")
SPANS = ("1", "2", "any")
# Every task type ``synth world`` asks about (the exact solver covers each; tests/sim keep the three in step).
WORLD_TASK_TYPES = ("object_counting", "object_abs_distance", "object_size_estimation", "room_size_estimation",
                    "object_rel_distance", "object_rel_direction_easy", "object_rel_direction_medium",
                    "object_rel_direction_hard", "route_planning", "obj_appearance_order", "egocentric_direction",
                    "last_action")
