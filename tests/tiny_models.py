"""Tiny causal LMs and tokenizers built locally from a config (no downloads), for tests."""

from __future__ import annotations

from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_CORPUS = [
    "<think> the chair is to the left of the table </think> <answer> A </answer>",
    "<think> reasoning process here </think> <answer> answer here </answer>",
    "Question: Where is the door? Choices: A. left B. right C. back D. front",
    "Frame 0: Observe: a red sofa ahead. Frame 1: After rotate left, Observe: a door.",
    "Please assume the role of an agent. The video represents your egocentric observations.",
    "0 1 2 3 4 5 6 7 8 9 meters [[A]] [[B]] [[C]] [[D]] E F G H",
]


def build_tiny_tokenizer(vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_CORPUS * 5, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<|im_start|>",
                                   eos_token="<|im_end|>", pad_token="<pad>")
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_causal_lm(path: str | Path, seed: int = 0) -> Path:
    """Save a 2-layer Llama (hidden 64) and its tokenizer to ``path``; returns the folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# A chat template that expands image entries into Qwen2.5-VL's vision tokens, as the real one does.
QWEN_VL_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_qwen25_vl_processor():
    """A Qwen2.5-VL processor from the tiny tokenizer and the PIL image processor (56-112 px images).

    transformers 5.24 without torchvision cannot run the processor's argument class check (it looks the
    names up in a video-processor registry that is only a placeholder then), so only that check is
    skipped while constructing; tokenizer, image processor and the processor's own __call__ are real.
    Without a video processor it cannot be saved, so tests pass it to the trainer directly.
    """
    from unittest import mock

    from transformers import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.processing_utils import ProcessorMixin

    tokenizer = build_tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": [
        "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]})
    tokenizer.chat_template = QWEN_VL_TEMPLATE
    image_processor = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112)
    with mock.patch.object(ProcessorMixin, "check_argument_for_proper_class", lambda self, name, arg: None):
        return Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                   chat_template=QWEN_VL_TEMPLATE)


def build_tiny_qwen25_vl(tokenizer, seed: int = 0):
    """A 2-layer Qwen2.5-VL (text hidden 64, one vision block of width 32) for ``tokenizer``."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
                     "max_position_embeddings": 4096, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id},
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                       "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2, "fullatt_block_indexes": [0], "window_size": 56},
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return Qwen2_5_VLForConditionalGeneration(config)


def build_tiny_lora_checkpoint(base: Path, folder: Path, tokenizer: bool = True) -> Path:
    """A LoRA adapter of ``base`` saved as training with ``lora:`` saves it, with non-zero B matrices (a
    fresh adapter is the identity, which would not show whether it was applied)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(folder)
    if tokenizer:
        AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder

