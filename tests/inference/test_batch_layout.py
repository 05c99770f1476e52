"""How a batch is laid out for prefill: rows grouped by the prefix they share (questions about one video),
and the one-group layout kept where a split would not pay."""

from __future__ import annotations

from embodied_r.inference.batch_layout import PrefixGroup, plan_groups, prefill_tokens, prefix_groups
from embodied_r.inference.generation import planned_prefill_tokens


def video_rows(video: int, questions: int, description: int = 60) -> list[list[int]]:
    """Token rows of ``questions`` questions after one video's description (a system prompt of 40 tokens
    first, as every reasoner prompt has)."""
    return [[0] * 40 + [video] * description + [100 + q] for q in range(questions)]


def test_rows_split_where_they_stop_sharing_and_lone_rows_share_the_batch_prefix() -> None:
    rows = video_rows(1, 3) + video_rows(2, 2) + video_rows(3, 1)
    groups = prefix_groups(rows, base=40)
    assert groups == [PrefixGroup((0, 1, 2), 100), PrefixGroup((3, 4), 100), PrefixGroup((5,), 40)]
    # the shared 40 once, each video's 60 once, one own token per question, the lone row's own 61
    assert prefill_tokens(rows, groups, 40) == 40 + 60 + 3 + 60 + 2 + 61
    assert plan_groups(rows, 40) == groups


def test_a_split_that_does_not_pay_keeps_one_group() -> None:
    # Two questions share 33 tokens beyond the system prompt, but each question is 200 tokens of its own.
    rows = [[0] * 40 + [1] * 33 + [100 + q] * 200 for q in range(2)] + [[0] * 40 + [2] * 233]
    whole = [PrefixGroup((0, 1, 2), 40)]
    split = prefix_groups(rows, base=40)
    assert len(split) == 2
    assert prefill_tokens(rows, split, 40) > 0.9 * prefill_tokens(rows, whole, 40)  # 706 of 739 tokens
    assert plan_groups(rows, 40) == whole


def test_planned_prefill_counts_each_batch_as_the_loop_lays_it_out() -> None:
    rows = [row for pair in zip(video_rows(1, 3), video_rows(2, 3)) for row in pair]  # interleaved
    batches = [[0, 1, 2, 3, 4, 5]]
    assert planned_prefill_tokens(rows, batches) == 40 + 2 * (60 + 3)
    assert planned_prefill_tokens(rows, batches, grouped=False) == 40 + 6 * 61
    assert planned_prefill_tokens(rows, [[0, 2, 4], [1, 3, 5]], grouped=False) == 2 * (100 + 3)
