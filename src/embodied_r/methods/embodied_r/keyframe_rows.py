"""Key-frame prompt rows: the paper's other arm, a vision-language model reading the key frames themselves.

Embodied-R's ablation (Zhao et al., 2025, Fig. 4e) trains Qwen2.5-VL-3B with RL on the video
directly (43.8 % test accuracy) against the cascade's 51.1 %. These rows are that arm's input, built from
exactly what the cascade's text rows are built from, so the two arms answer the same questions:

- the text row of each question comes from ``perception.prompt_rows.build_rows`` (same ids, answers,
  options, metadata, and the same questions skipped for lack of perception);
- its user turn keeps the official wording, with the video header saying the frames are shown, and each
  key frame as an image after its frame line, ``Frame k: After <action>`` (the action the perception
  stage read; the VLM sees the frame itself instead of its description; see ``core.keyframe_chat``);
- at most ``max_frames`` frames, the latest ones (the oldest go first, as the context policy drops them),
  each resized to the pixel budget (``keyframe_images``); ``meta.keyframes`` records what was kept.

The official exact-bytes template (``official``) is a text format and is refused here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, read_json
from embodied_r.core.records import KeyframeSet, Perception, PromptRow, QARecord
from embodied_r.methods.embodied_r.keyframe_images import FrameWriter, KeyframeBudget
from embodied_r.methods.embodied_r.perception.prompt_rows import build_rows
from embodied_r.methods.embodied_r.prompts import ROLE_SENTENCE, VIDEO_HEADER, get_template, question_block

# The official header, but the frames are shown rather than described.
KEYFRAME_VIDEO_HEADER = VIDEO_HEADER.replace(
    "The content of the video will be described in the form of text.",
    "The content of the video is given as its key frames, each after its frame line.",
)
TIMESTAMP_TOLERANCE_S = 1e-3  # perception frames carry the key frames' own timestamps
INPUT_NAME = "keyframes"  # meta.input of a key-frame row (text rows carry none)


def keyframe_line(index: int, action: Any) -> str:
    """The frame line before a key frame's image.

    >>> keyframe_line(0, None), keyframe_line(2, " Rotate  left ")
    ('Frame 0:', 'Frame 2: After Rotate left')
    """
    action_text = " ".join(str(action or "").split())
    return f"Frame {index}: After {action_text}" if index > 0 and action_text else f"Frame {index}:"


def keyframe_user_content(frames: Sequence[Mapping[str, Any]], question: str, options: Sequence[str] | None,
                          version: str) -> list[dict[str, str]]:
    """The user turn as content parts: preamble, one frame line + image per frame (``index``, ``action``,
    ``image``), then the question block, in the words of template ``version``."""
    template = get_template(version)
    if template.exact:
        raise DataFileError(f"prompt version {version!r} is the official text bytes; key-frame rows use "
                            "official-v1 (the same words), structured-v1 or compact-v1")
    opening = (f"{ROLE_SENTENCE}\nVideo content: \n<\n{KEYFRAME_VIDEO_HEADER}" if template.preamble
               else "Video content:")
    content = [{"type": "text", "text": opening}]
    for frame in frames:
        content.append({"type": "text", "text": "\n" + keyframe_line(int(frame["index"]), frame.get("action"))})
        content.append({"type": "image", "image": str(frame["image"])})
    closing = "\n>\n" if template.preamble else "\n"
    content.append({"type": "text", "text": closing + question_block(question, options)})
    return content


# ---------------------------------------------------------------------------------------------------
# Which image shows each perceived frame
# ---------------------------------------------------------------------------------------------------


def keyframe_set_for(qa: QARecord, keyframes_dir: Path) -> tuple[KeyframeSet, list[Path]]:
    """The key frames of the question's video and their saved images (``keyframes --save-images``)."""
    json_path = keyframes_dir / f"{Path(qa.video).stem}.keyframes.json"
    if not json_path.is_file():
        raise DataFileError(f"question {qa.id}: no key frames for its video ({json_path} is missing); run "
                            f"`embodied-r keyframes VIDEOS --out {keyframes_dir} --save-images` first")
    keyframes = KeyframeSet.from_dict(read_json(json_path))
    images = keyframes.meta.get("images") or []
    if len(images) != len(keyframes.frames):
        raise DataFileError(f"question {qa.id}: {json_path} lists {len(images)} saved image(s) for "
                            f"{len(keyframes.frames)} key frames; rerun `embodied-r keyframes` with --save-images")
    return keyframes, [keyframes_dir / str(name) for name in images]


def perceived_frames(qa: QARecord, perception: Perception, keyframes: KeyframeSet,
                     images: Sequence[Path]) -> list[dict[str, Any]]:
    """Per perceived frame, oldest first: its number, the action perception read, its timestamp and the
    image file of the key frame at that timestamp."""
    out = []
    for index, frame in enumerate(perception.frames):
        timestamp = float(frame.get("timestamp", -1.0))
        nearest = min(range(len(keyframes.frames)), key=lambda i: abs(keyframes.timestamps[i] - timestamp),
                      default=None)
        if nearest is None or abs(keyframes.timestamps[nearest] - timestamp) > TIMESTAMP_TOLERANCE_S:
            raise DataFileError(f"question {qa.id}: its perception frame at {timestamp:.3f} s is not one of the key "
                                f"frames of {keyframes.video}; perceive and select key frames with the same "
                                "settings")
        source = images[nearest]
        if not source.is_file():
            raise DataFileError(f"question {qa.id}: key frame image {source} is missing; rerun `embodied-r "
                                "keyframes --save-images` for its video")
        out.append({"index": index, "action": frame.get("action"), "timestamp": timestamp, "source": source})
    return out


# ---------------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------------


def build_keyframe_rows(
    questions: Sequence[QARecord], perceptions: Mapping[str, Perception], keyframes_dir: Path, out_path: Path,
    prompt_version: str, budget: KeyframeBudget,
) -> tuple[list[PromptRow], list[str]]:
    """Key-frame rows for the questions the text arm has rows for, and the ids of those without perception.
    Frame images are written to ``<out stem>.frames/`` beside ``out_path``, referenced relative to its folder."""
    text_rows, missing = build_rows(questions, perceptions, prompt_version)
    by_id = {qa.id: qa for qa in questions}
    base = out_path.parent
    writer = FrameWriter(base / f"{out_path.stem}.frames", base, budget)
    sets: dict[Path, tuple[KeyframeSet, list[Path]]] = {}
    rows = []
    for text_row in text_rows:
        qa = by_id[text_row.id]
        key = keyframes_dir / Path(qa.video).stem
        if key not in sets:
            sets[key] = keyframe_set_for(qa, keyframes_dir)
        frames = perceived_frames(qa, perceptions[qa.id], *sets[key])
        if not frames:
            raise DataFileError(f"question {qa.id}: its perception record holds no frames")
        shown = frames[-budget.max_frames:]  # the oldest frames go first, as the context policy drops them
        sizes = []
        for frame in shown:
            frame["image"], size = writer.write(frame["source"], Path(qa.video).stem)
            sizes.append(size)
        messages = [{"role": "system", "content": get_template(prompt_version).system},
                    {"role": "user", "content": keyframe_user_content(shown, qa.question, qa.options,
                                                                      prompt_version)}]
        meta = {**text_row.meta, "input": INPUT_NAME, "keyframes": {
            "shown": len(shown), "perceived": len(frames), "dropped_oldest": len(frames) - len(shown),
            "timestamps": [f["timestamp"] for f in shown], "sizes": sizes, **budget.describe()}}
        rows.append(dataclasses.replace(text_row, prompt=messages, meta=meta))  # type: ignore[arg-type]
    return rows, missing


__all__ = ["INPUT_NAME", "KEYFRAME_VIDEO_HEADER", "build_keyframe_rows", "keyframe_line", "keyframe_user_content",
           "perceived_frames"]
