"""The greedy loop gives ``model.generate``'s tokens: with a shared prefix, with rows that end early,
on a sliding-window model, with questions about one video grouped so that its description runs once;
and the engine checks it on its first batch before using it."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.chat import render_chat
from embodied_r.inference import generation, greedy
from embodied_r.inference.generation import TransformersEngine, generate_batch
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny():
    """A 2-layer Llama whose greedy text depends on its prompt (the shared tiny model, at the default
    initialisation, says one token forever, which would make every comparison here trivial)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval(), tokenizer


def reasoner_texts(tokenizer, count: int = 4) -> list[str]:
    objects = ("sofa", "red chair", "tv", "door", "bed", "lamp")[:count]
    return [render_chat(tokenizer, build_reasoner_messages([{"delta": f"A {o} ahead."},
                                                            {"action": "turn left", "delta": "A door."}],
                                                           f"Where is object {i}?", ["A. left", "B. right"]))
            for i, o in enumerate(objects)]


def token_lists(tokenizer, texts: list[str]) -> list[list[int]]:
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_the_loop_gives_generates_tokens_with_a_shared_prefix(tiny) -> None:
    model, tokenizer = tiny
    texts = reasoner_texts(tokenizer)
    loop = generate_batch(model, tokenizer, texts, max_new_tokens=16, greedy_loop=True)
    plain = generate_batch(model, tokenizer, texts, max_new_tokens=16)
    assert loop == plain
    assert len(set(loop)) == len(loop)  # every row says something of its own, so rows were not mixed up


def test_rows_that_end_early_leave_the_batch_without_changing_the_others(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    rows = token_lists(tokenizer, reasoner_texts(tokenizer))
    first = greedy.greedy_decode(model, rows, 0, tokenizer.pad_token_id, max_new_tokens=12)
    # The random model does not say its end token within 12 steps; make the end token the first one of
    # row 0's (after its first step) that some other row never says, so rows end at different steps.
    stop = next(t for t in first[0][1:] if any(t not in other for other in first[1:]))
    monkeypatch.setattr(model.generation_config, "eos_token_id", stop)
    selected: list[int] = []
    from embodied_r.inference import reserved_cache

    original = reserved_cache.ReservedLayer.batch_select_indices

    def spy(self, indices):
        selected.append(len(indices))
        return original(self, indices)

    monkeypatch.setattr(reserved_cache.ReservedLayer, "batch_select_indices", spy)
    loop = greedy.greedy_decode(model, rows, 0, tokenizer.pad_token_id, max_new_tokens=12)
    assert selected  # some row left the batch mid-way
    assert loop[0][-1] == stop and len(loop[0]) < 12
    assert any(len(c) == 12 for c in loop)  # and some row went on to the end
    plain = model.generate(**_left_padded(rows, tokenizer), max_new_tokens=12, do_sample=False,
                           pad_token_id=tokenizer.pad_token_id)
    width = max(map(len, rows))
    for row, continuation in zip(plain[:, width:].tolist(), loop):
        assert row[:len(continuation)] == continuation
        assert all(t == tokenizer.pad_token_id for t in row[len(continuation):])


def _left_padded(rows: list[list[int]], tokenizer) -> dict:
    ids, mask = generation.prefix_layout(rows, 0, tokenizer.pad_token_id, "cpu")
    return {"input_ids": ids, "attention_mask": mask}


def test_the_engine_checks_the_loop_once_and_uses_it(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)
    engine = TransformersEngine(model, tokenizer)
    calls: list[int] = []
    original = greedy.greedy_decode

    def counted(*args, **kwargs):
        calls.append(len(args[1]))
        return original(*args, **kwargs)

    monkeypatch.setattr(greedy, "greedy_decode", counted)
    conversations = [build_reasoner_messages([{"delta": "A lamp."}], f"Question {i}?", ["A. x", "B. y"])
                     for i in range(5)]
    answers = engine.generate_chats(conversations, max_new_tokens=8, batch_size=2)
    report = engine.greedy_loop_report
    assert report == {"used": True, "checked_rows": 2, "agreed": True}
    assert calls == [2, 2, 2, 1]  # the check's two rows, then every batch through the loop
    plain = TransformersEngine(model, tokenizer, greedy_loop=False).generate_chats(conversations, 8, batch_size=2)
    assert answers == plain
    TransformersEngine(model, tokenizer).generate_chats(conversations[:1], max_new_tokens=8)
    assert calls == [2, 2, 2, 1, 1]  # a new engine on the same model does not check again


def test_a_loop_that_disagrees_is_not_used(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)

    def wrong(model, token_lists, prefix, pad_id, max_new_tokens, groups=None):
        return [[tokenizer.convert_tokens_to_ids("A")] * max_new_tokens for _ in token_lists]

    monkeypatch.setattr(greedy, "greedy_decode", wrong)
    engine = TransformersEngine(model, tokenizer)
    conversations = [build_reasoner_messages([{"delta": "A lamp."}], f"Question {i}?", ["A. x", "B. y"])
                     for i in range(3)]
    answers = engine.generate_chats(conversations, max_new_tokens=8, batch_size=2)
    assert engine.greedy_loop_report == {"used": False, "checked_rows": 2, "agreed": False,
                                         "reason": "disagreed with model.generate on the first batch"}
    assert answers == TransformersEngine(model, tokenizer, greedy_loop=False).generate_chats(conversations, 8)
    generation._GREEDY_CHECKS.pop(model, None)


def test_a_generation_config_that_changes_greedy_decoding_keeps_generate(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)
    monkeypatch.setattr(model.generation_config, "repetition_penalty", 1.3)
    assert greedy.unsupported_reason(model) == "the model's generation config sets repetition_penalty=1.3"
    with pytest.raises(ValueError, match="repetition_penalty"):
        greedy.greedy_decode(model, [[1, 2, 3]], 0, tokenizer.pad_token_id, 4)
    engine = TransformersEngine(model, tokenizer)
    engine.generate_chats([build_reasoner_messages([{"delta": "A lamp."}], "Q?", ["A. x", "B. y"])], 4)
    assert engine.greedy_loop_report == {"used": False,
                                         "reason": "the model's generation config sets repetition_penalty=1.3"}
    generation._GREEDY_CHECKS.pop(model, None)


def test_the_reserved_cache_refuses_to_overflow() -> None:
    from embodied_r.inference.reserved_cache import reserved_cache

    cache = reserved_cache(1, capacity=3)
    cache.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), 0)
    with pytest.raises(RuntimeError, match="holds 3 positions; 2 are used and 2 more"):
        cache.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), 0)


def test_cropping_reordering_and_resetting_a_reserved_layer_keep_its_room_consistent() -> None:
    from embodied_r.inference.reserved_cache import ReservedLayer

    layer = ReservedLayer(capacity=6)
    layer.batch_repeat_interleave(2)  # nothing written yet: nothing to repeat (as DynamicLayer)
    rows = torch.arange(2 * 1 * 3 * 1, dtype=torch.float32).view(2, 1, 3, 1)
    layer.update(rows, rows)
    layer.crop(-1)  # the last position goes, and the next write takes its place
    layer.update(torch.full((2, 1, 1, 1), -1.0), torch.full((2, 1, 1, 1), -1.0))
    assert layer.keys[:, 0, :, 0].tolist() == [[0.0, 1.0, -1.0], [3.0, 4.0, -1.0]]
    layer.reorder_cache(torch.tensor([1, 0]))
    layer.update(torch.zeros(2, 1, 1, 1), torch.zeros(2, 1, 1, 1))
    assert layer.keys[:, 0, :, 0].tolist() == [[3.0, 4.0, -1.0, 0.0], [0.0, 1.0, -1.0, 0.0]]
    with pytest.raises(ValueError, match="negative"):
        layer.crop(2)
    layer.reset()
    layer.update(torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1))
    assert layer.keys.tolist() == [[[[1.0]]]] and layer.get_seq_length() == 1


def test_a_model_whose_layers_share_keys_and_values_keeps_generate(tiny) -> None:
    model, _ = tiny
    model.config.kv_sharing_modes = ["reuse", "own"]
    try:
        assert "kv_sharing_modes" in greedy.unsupported_reason(model)
    finally:
        del model.config.kv_sharing_modes


def test_a_loop_that_fails_on_a_model_leaves_decoding_to_generate(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)

    def broken(*args, **kwargs):
        raise AttributeError("key_room")

    monkeypatch.setattr(greedy, "greedy_decode", broken)
    engine = TransformersEngine(model, tokenizer)
    conversations = [build_reasoner_messages([{"delta": "A lamp."}], f"Question {i}?", ["A. x", "B. y"])
                     for i in range(3)]
    answers = engine.generate_chats(conversations, max_new_tokens=6, batch_size=2)
    assert engine.greedy_loop_report == {"used": False, "reason": "the loop failed: AttributeError('key_room')"}
    assert answers == TransformersEngine(model, tokenizer, greedy_loop=False).generate_chats(conversations, 6)
    generation._GREEDY_CHECKS.pop(model, None)


def test_the_loop_gives_generates_tokens_on_a_sliding_window_model(tmp_path: Path) -> None:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from tests.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = Gemma3TextConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention"],
                              pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                              bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    texts = reasoner_texts(tokenizer, 3)
    assert greedy.unsupported_reason(model) is None
    loop = generate_batch(model, tokenizer, texts, max_new_tokens=20, greedy_loop=True)
    assert loop == generate_batch(model, tokenizer, texts, max_new_tokens=20)


def video_conversations(videos: dict[str, int]) -> list:
    """Reasoner chats of several questions per video: the questions of a video share its whole description."""
    conversations = []
    for video, questions in videos.items():
        frames = [{"delta": f"A {video} ahead."}] + [
            {"action": f"turn left {n}0 degrees", "delta": f"A door {n} m beside the {video}."} for n in range(1, 6)]
        conversations += [build_reasoner_messages(frames, f"Where is object {q} from the {video}?",
                                                  ["A. left", "B. right"]) for q in range(questions)]
    return conversations


def test_questions_about_one_video_run_its_description_once_and_give_generates_tokens(tiny) -> None:
    from embodied_r.inference.batch_layout import PrefixGroup, plan_groups, prefill_tokens

    model, tokenizer = tiny
    texts = [render_chat(tokenizer, c) for c in video_conversations({"sofa": 3, "bed": 2, "tv": 1})]
    rows = token_lists(tokenizer, texts)
    base = generation.common_prefix(rows)
    groups = plan_groups(rows, base)
    assert sorted(len(g.rows) for g in groups) == [1, 2, 3]  # one group per video
    assert prefill_tokens(rows, groups, base) < 0.9 * prefill_tokens(rows, [PrefixGroup(tuple(range(6)), base)], base)
    loop = greedy.greedy_decode(model, rows, base, tokenizer.pad_token_id, 16, groups=groups)
    alone = generate_batch(model, tokenizer, texts, max_new_tokens=16, share_prefix=False)
    assert tokenizer.batch_decode(loop, skip_special_tokens=True) == alone
    assert len(set(alone)) >= 4  # the rows say different things, so a row mix-up would show


def test_the_engine_groups_a_batchs_questions_by_video_and_checks_the_joined_layout(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)
    conversations = video_conversations({"sofa": 3, "bed": 3, "tv": 2})
    conversations = [conversations[i] for i in (0, 3, 6, 1, 4, 7, 2, 5)]  # videos interleaved
    seen: list[list[int]] = []
    original = greedy.greedy_decode

    def recorded(*args, **kwargs):
        if kwargs.get("groups"):
            seen.append(sorted(len(g.rows) for g in kwargs["groups"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(greedy, "greedy_decode", recorded)
    engine = TransformersEngine(model, tokenizer)
    answers = engine.generate_chats(conversations, max_new_tokens=12, batch_size=8)
    report = engine.greedy_loop_report
    assert report == {"used": True, "checked_rows": 2, "agreed": True,
                      "joined": {"used": True, "checked_rows": 3, "checked_groups": 2, "agreed": True}}
    assert seen == [[1, 2], [2, 3, 3]]  # the joined layout's check, then the batch: one group per video
    plain = TransformersEngine(model, tokenizer, greedy_loop=False).generate_chats(conversations, 12, batch_size=8)
    assert answers == plain
    generation._GREEDY_CHECKS.pop(model, None)


def test_without_grouping_the_engine_decodes_each_batch_as_one_group(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)
    seen: list = []
    original = greedy.greedy_decode

    def recorded(*args, **kwargs):
        seen.append(kwargs.get("groups"))
        return original(*args, **kwargs)

    monkeypatch.setattr(greedy, "greedy_decode", recorded)
    engine = TransformersEngine(model, tokenizer, group_prefixes=False)
    engine.generate_chats(video_conversations({"sofa": 2, "bed": 2}), max_new_tokens=4, batch_size=4)
    assert seen == [None, None]  # the loop's check and the one batch, neither grouped
    assert "joined" not in engine.greedy_loop_report
    generation._GREEDY_CHECKS.pop(model, None)


def test_a_joined_layout_that_disagrees_leaves_the_loop_ungrouped(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    generation._GREEDY_CHECKS.pop(model, None)
    original = greedy.greedy_decode

    def wrong_when_grouped(*args, **kwargs):
        if kwargs.get("groups") and len(kwargs["groups"]) > 1:
            return [[tokenizer.convert_tokens_to_ids("A")] * args[4] for _ in args[1]]
        return original(*args, **kwargs)

    monkeypatch.setattr(greedy, "greedy_decode", wrong_when_grouped)
    engine = TransformersEngine(model, tokenizer)
    # The first batch (two questions about one video) does not group; the second, three videos, does.
    conversations = video_conversations({"sofa": 2}) + video_conversations({"bed": 2, "tv": 2, "cat": 1})
    first = engine.generate_chats(conversations[:2], max_new_tokens=8, batch_size=8)
    assert "joined" not in engine.greedy_loop_report
    second = engine.generate_chats(conversations[2:], max_new_tokens=8, batch_size=8)
    report = engine.greedy_loop_report
    assert report["used"] is True and report["joined"]["used"] is False
    assert report["joined"]["reason"] == "disagreed with model.generate on the first grouped batch"
    plain = TransformersEngine(model, tokenizer, greedy_loop=False)
    assert first + second == plain.generate_chats(conversations[:2], 8) + plain.generate_chats(conversations[2:], 8)
    generation._GREEDY_CHECKS.pop(model, None)


def test_caches_joined_right_aligned_keep_each_rows_keys_and_fill_the_rest_with_zeros() -> None:
    from embodied_r.inference.reserved_cache import reserved_cache, right_aligned

    short, long = reserved_cache(1, 4), reserved_cache(1, 6)
    short.layers[0].update(torch.ones(2, 1, 3, 2), torch.ones(2, 1, 3, 2) * 2)
    long.layers[0].update(torch.ones(1, 1, 5, 2) * 3, torch.ones(1, 1, 5, 2) * 4)
    joined = right_aligned([short, long], capacity=7)
    layer = joined.layers[0]
    assert layer.keys.shape == (3, 1, 5, 2) and joined.get_seq_length() == 5
    assert torch.equal(layer.keys[:2, :, :2], torch.zeros(2, 1, 2, 2))
    assert torch.equal(layer.keys[:2, :, 2:], torch.ones(2, 1, 3, 2))
    assert torch.equal(layer.values[2], torch.ones(1, 5, 2) * 4)
    layer.update(torch.zeros(3, 1, 2, 2), torch.zeros(3, 1, 2, 2))  # the room left for decoding
    with pytest.raises(RuntimeError, match="holds 7 positions"):
        layer.update(torch.zeros(3, 1, 1, 2), torch.zeros(3, 1, 1, 2))
    with pytest.raises(ValueError, match="do not fit"):
        right_aligned([short, long], capacity=4)


def test_groups_that_miss_a_row_or_share_less_than_the_batch_are_refused(tiny) -> None:
    from embodied_r.inference.batch_layout import PrefixGroup

    model, tokenizer = tiny
    rows = token_lists(tokenizer, reasoner_texts(tokenizer, 3))
    with pytest.raises(ValueError, match="exactly once"):
        greedy.greedy_decode(model, rows, 0, tokenizer.pad_token_id, 2, groups=[PrefixGroup((0, 1), 0)])
    with pytest.raises(ValueError, match="at least the batch's 5"):
        greedy.greedy_decode(model, rows, 5, tokenizer.pad_token_id, 2, groups=[PrefixGroup((0, 1, 2), 2)])


def test_rows_wider_than_a_sliding_window_keep_plain_left_padding() -> None:
    from transformers import Gemma3TextConfig

    from embodied_r.inference.batch_layout import gaps_allowed, window_of

    config = Gemma3TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention"])
    assert window_of(config) == 8
    from transformers import LlamaConfig, Qwen2Config

    assert window_of(Qwen2Config(use_sliding_window=False, sliding_window=8)) is None
    # Qwen2 slides only the layers from max_window_layers on: at its depth no layer slides, one below it does.
    assert window_of(Qwen2Config(use_sliding_window=True, sliding_window=8, num_hidden_layers=2,
                                 max_window_layers=2)) is None
    assert window_of(Qwen2Config(use_sliding_window=True, sliding_window=8, num_hidden_layers=2,
                                 max_window_layers=1)) == 8
    assert window_of(LlamaConfig()) is None
    model = type("Model", (), {"config": config})()
    assert gaps_allowed(model, 8) and not gaps_allowed(model, 9)


def test_a_sliding_window_model_decodes_rows_longer_than_its_window_as_each_row_alone(tmp_path: Path) -> None:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from tests.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = Gemma3TextConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention"], initializer_range=0.2,
                              pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                              bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    # A long shared prefix, then one row with 2 tokens of its own and one with 30: laid out with the prefix
    # shared, the short row's last tokens would have 28 columns of padding inside their 8-position window.
    shared = list(range(5, 45))
    rows = [shared + [150, 151], shared + list(range(60, 90))]  # (this model says other tokens with the gap)
    alone = [generate_batch(model, tokenizer, None, max_new_tokens=12, token_lists=[r])[0] for r in rows]
    assert generate_batch(model, tokenizer, None, max_new_tokens=12, token_lists=rows, greedy_loop=True) == alone
    assert generate_batch(model, tokenizer, None, max_new_tokens=12, token_lists=rows) == alone
