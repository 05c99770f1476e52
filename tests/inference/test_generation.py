from __future__ import annotations

from pathlib import Path

from embodied_r.core.chat import render_chat
from embodied_r.inference import generation
from embodied_r.inference.generation import generate_batch
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages


def test_shared_prefix_generation_matches_the_plain_path(tiny_lm_dir: Path, monkeypatch) -> None:
    from embodied_r.inference.models import load_reasoner

    model, tokenizer = load_reasoner(str(tiny_lm_dir), dtype="float32")
    frames = [[{"delta": f"A {o} ahead."}, {"action": "turn left", "delta": "A door."}]
              for o in ("sofa", "red chair", "tv")]
    texts = [render_chat(tokenizer, build_reasoner_messages(f, f"Where is object {i}?", ["A. left", "B. right"]))
             for i, f in enumerate(frames)]
    calls: list[dict] = []
    original = model.generate

    def spy(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(model, "generate", spy)
    shared = generate_batch(model, tokenizer, texts, max_new_tokens=12)
    plain = generate_batch(model, tokenizer, texts, max_new_tokens=12, share_prefix=False)
    assert shared == plain  # greedy: same tokens whether the prefix is shared or not
    keyword = generation.cache_keyword(model)
    assert keyword in calls[0] and keyword not in calls[1]  # the first call really used the shared cache
    # The shared cache has room for every token generate adds (written in place, not concatenated).
    from embodied_r.inference.reserved_cache import ReservedLayer

    layers = calls[0][keyword].layers
    assert layers and all(isinstance(layer, ReservedLayer) for layer in layers)
    assert all(layer.key_room.shape[2] >= calls[0]["input_ids"].shape[1] + 12 for layer in layers)
    single = generate_batch(model, tokenizer, texts[:1], max_new_tokens=12)
    assert single == plain[:1]  # one prompt alone: the same answer as inside the batch


def test_the_shared_prefix_pass_asks_for_one_position_of_logits(tiny_lm_dir: Path) -> None:
    from embodied_r.inference.models import load_reasoner

    model, _ = load_reasoner(str(tiny_lm_dir), dtype="float32")
    seen: list[dict] = []
    handle = model.register_forward_hook(lambda module, args, kwargs, output: seen.append(
        {"keep": kwargs.get("logits_to_keep"), "positions": output.logits.shape[1]}), with_kwargs=True)
    try:
        cache = generation._prefix_cache(model, list(range(5, 25)), rows=3, capacity=40)
    finally:
        handle.remove()
    # Only the cache is wanted: the pass computes one position of logits, not one per prefix token.
    assert seen == [{"keep": 1, "positions": 1}]
    assert cache.get_seq_length() == 20
