"""Loading a vision-language model's processor, with or without torchvision.

transformers assembles Qwen2.5-VL's processor from a tokenizer, an image processor and a video
processor, and the video processor needs torchvision. PyPI's torchvision does not import beside this
project's CPU torch build, so ``AutoProcessor.from_pretrained`` fails there even when only images are
wanted. :func:`load_vl_processor` then builds the same processor class from ``AutoTokenizer`` and the
PIL image processor (``AutoImageProcessor`` picks it when torchvision is missing), with no video
processor: images work, videos raise :class:`VLProcessorError`. The result saves with
``save_pretrained`` (tokenizer, image processor, chat template) into a folder that loads back here, so
training can save it as its processing class.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path
from typing import Any

from embodied_r.inference.models import ModelLoadError

logger = logging.getLogger(__name__)

# The sub-processors the torchvision-free build knows how to provide (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).
_BUILDABLE_PARTS = {"image_processor", "tokenizer", "video_processor"}
NO_VIDEO = ("this processor was built without a video processor because torchvision is not importable; "
            "it handles images only. Install the torchvision build matching your torch to process videos")


class VLProcessorError(ModelLoadError):
    """A vision-language processor that cannot be loaded, or asked for what it cannot do."""


def load_vl_processor(model_path: str | os.PathLike[str], padding_side: str = "left",
                      truncation_side: str | None = None) -> Any:
    """The processor of a vision-language model (``ProcessorMixin``), ``padding_side`` padding.

    Tries ``AutoProcessor`` first; when that fails and torchvision does not import, builds the model's
    processor class without a video processor (see the module docstring). Raises
    ``VLProcessorError`` saying what is missing otherwise, or when the model has a tokenizer only.
    """
    from transformers import AutoProcessor, ProcessorMixin

    path = str(model_path)
    sides = {"padding_side": padding_side, **({"truncation_side": truncation_side} if truncation_side else {})}
    try:
        processor = AutoProcessor.from_pretrained(path, **sides)
    except (ImportError, AttributeError, OSError, TypeError, ValueError) as exc:
        if torchvision_importable():
            raise VLProcessorError(f"{path}: cannot load the processor ({type(exc).__name__}: {exc})") from exc
        logger.info("AutoProcessor failed without torchvision (%s); building an image-only processor", exc)
        processor = build_image_only_processor(path, sides, cause=exc)
    if not isinstance(processor, ProcessorMixin):
        raise VLProcessorError(f"{path}: this model comes with a text tokenizer only, not a vision-language "
                               "processor; use a vision-language model (e.g. Qwen/Qwen2.5-VL-3B-Instruct)")
    for side, value in sides.items():
        setattr(processor.tokenizer, side, value)  # a processor loaded from a saved one keeps the old sides
    return processor


def torchvision_importable() -> bool:
    """Whether ``import torchvision`` works (an installed wheel built for another torch fails)."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - a mismatched build raises RuntimeError or OSError, not only ImportError
        return False
    return True


# ---------------------------------------------------------------------------------------------------
# The torchvision-free build
# ---------------------------------------------------------------------------------------------------


def build_image_only_processor(model_path: str, tokenizer_kwargs: dict[str, Any] | None = None,
                               cause: BaseException | None = None) -> Any:
    """The model's processor class from its tokenizer and image processor, without a video processor."""
    import transformers
    from transformers import AutoImageProcessor, AutoTokenizer

    why = f" (AutoProcessor: {type(cause).__name__}: {cause})" if cause is not None else ""
    name = processor_class_name(model_path)
    if name is None:
        raise VLProcessorError(f"{model_path}: no processor_class in processor_config.json, preprocessor_config.json "
                               f"or tokenizer_config.json, and no known processor for its config's model_type{why}")
    base = getattr(transformers, name, None)
    parts = set(base.get_attributes()) if isinstance(base, type) else set()
    if not {"image_processor", "tokenizer"} <= parts or not parts <= _BUILDABLE_PARTS:
        raise VLProcessorError(f"{model_path}: its processor {name} needs {sorted(parts) or 'an unknown class'}; "
                               "without torchvision only tokenizer + image processor processors (Qwen2-VL, "
                               f"Qwen2.5-VL, Qwen3-VL) can be built: install torchvision{why}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, **(tokenizer_kwargs or {}))
        image_processor = AutoImageProcessor.from_pretrained(model_path)
    except (ImportError, OSError, TypeError, ValueError) as exc:
        raise VLProcessorError(f"{model_path}: cannot load the tokenizer or the image processor for {name} "
                               f"({type(exc).__name__}: {exc}); the folder needs tokenizer files and "
                               f"preprocessor_config.json{why}") from exc
    chat_template = _chat_template(model_path) or getattr(tokenizer, "chat_template", None)
    parts_given = {"image_processor": image_processor, "tokenizer": tokenizer}
    if "video_processor" in parts:
        parts_given["video_processor"] = None
    return image_only_class(base)(**parts_given, chat_template=chat_template)


def processor_class_name(model_path: str) -> str | None:
    """The processor class a model folder names, else the one transformers maps its ``model_type`` to."""
    for filename in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        name = (_read_json(model_path, filename) or {}).get("processor_class")
        if name:
            return str(name)
    model_type = (_read_json(model_path, "config.json") or {}).get("model_type")
    if not model_type:
        return None
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    return PROCESSOR_MAPPING_NAMES.get(model_type)


def _read_json(model_path: str, filename: str) -> dict[str, Any] | None:
    from transformers.utils import cached_file

    resolved = cached_file(model_path, filename, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False, _raise_exceptions_for_gated_repo=False)
    if not resolved:
        return None
    data = json.loads(Path(resolved).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _chat_template(model_path: str) -> str | None:
    from transformers.utils import cached_file

    jinja = cached_file(model_path, "chat_template.jinja", _raise_exceptions_for_missing_entries=False,
                        _raise_exceptions_for_connection_errors=False, _raise_exceptions_for_gated_repo=False)
    if jinja:
        return Path(jinja).read_text(encoding="utf-8")
    template = (_read_json(model_path, "chat_template.json") or {}).get("chat_template")  # the older layout
    return template if isinstance(template, str) else None


@functools.cache
def image_only_class(base: type) -> type:
    """``base`` (a ``ProcessorMixin`` class) built with no video processor, and savable without one."""

    class ImageOnly(base):  # type: ignore[misc, valid-type]
        def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
            # transformers 5.x checks each sub-processor's class against a list of registries that
            # includes VIDEO_PROCESSOR_MAPPING; without torchvision that is transformers' dummy object with no
            # ``_extra_content``, so the check crashes with an AttributeError. Only the absent video
            # processor skips it; the tokenizer and the image processor are still checked.
            if argument_name == "video_processor" and argument is None:
                return None
            return super().check_argument_for_proper_class(argument_name, argument)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            videos = kwargs.get("videos", args[2] if len(args) > 2 else None)
            if videos is not None:
                raise VLProcessorError(NO_VIDEO)
            return super().__call__(*args, **kwargs)

        def save_pretrained(self, save_directory: str | os.PathLike[str], push_to_hub: bool = False,
                            **kwargs: Any) -> list[str]:
            """What ``ProcessorMixin.save_pretrained`` writes, less the absent video processor (which it
            cannot serialise): tokenizer files, ``processor_config.json`` with the image processor nested
            (transformers 5's layout), ``preprocessor_config.json`` (the older one) and the chat template."""
            if push_to_hub:
                raise VLProcessorError("pushing an image-only processor to the hub is not supported; save it "
                                       "and upload the folder")
            folder = Path(save_directory)
            folder.mkdir(parents=True, exist_ok=True)
            self.tokenizer._set_processor_class(base.__name__)
            self.tokenizer.save_pretrained(folder)
            self.image_processor.save_pretrained(folder)
            config = {k: v for k, v in self.to_dict().items() if k != "video_processor"}
            (folder / "processor_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n",
                                                          encoding="utf-8")
            templates = self.chat_template if isinstance(self.chat_template, dict) else \
                {"default": self.chat_template} if isinstance(self.chat_template, str) else {}
            for template_name, template in templates.items():
                target = folder / ("chat_template.jinja" if template_name == "default"
                                   else Path("chat_templates") / f"{Path(template_name).name}.jinja")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(template, encoding="utf-8")
            return [str(folder / "processor_config.json")]

        def __reduce__(self) -> Any:
            # A class made in a function cannot be pickled by name; rebuild it from its parts instead.
            return (_rebuild, (base.__module__, base.__name__, self.tokenizer, self.image_processor,
                               self.chat_template))

    # Named as the base class, so saved configs (``processor_class``) name a class transformers knows.
    ImageOnly.__name__ = base.__name__
    ImageOnly.__qualname__ = f"image_only_class.<locals>.{base.__name__}"
    ImageOnly.__doc__ = f"{base.__name__} with no video processor (torchvision is not importable)."
    return ImageOnly


def _rebuild(module: str, name: str, tokenizer: Any, image_processor: Any, chat_template: Any) -> Any:
    import importlib

    base = getattr(importlib.import_module(module), name)
    parts: dict[str, Any] = {"image_processor": image_processor, "tokenizer": tokenizer}
    if "video_processor" in base.get_attributes():
        parts["video_processor"] = None
    return image_only_class(base)(**parts, chat_template=chat_template)


__all__ = ["NO_VIDEO", "VLProcessorError", "build_image_only_processor", "image_only_class", "load_vl_processor",
           "processor_class_name", "torchvision_importable"]
