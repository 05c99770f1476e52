"""The shared-prefix policy update (training/shared_prefix.py) against TRL's per-row path.

Every exactness test runs both paths on the same trainer, model and batch: the log-probabilities and
entropies, the reference-model and old log-probabilities, the loss, and the gradient of every parameter.
The batches have what TRL's batches have: left-padded prompts of different lengths (plus extra pad
columns, as ``pad_to_multiple_of`` adds), right-padded completions, a truncated completion (no EOS),
rows shuffled so that a group's members are not adjacent, and two prompts that differ only in their
last token (which must not be merged).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from embodied_r.training import shared_prefix
from embodied_r.training.grpo import build_trainer, train
from embodied_r.training.recipe import RecipeError, load_recipe
from embodied_r.training.trainer import ReasonerGRPOTrainer

FP32 = {"rtol": 1e-5, "atol": 1e-6}  # log-probabilities are O(1..10), so atol only matters near zero
GRAD_RTOL_FP32 = 1e-5


def zero_reward(completions: list[Any], **_: Any) -> list[float]:
    return [0.0] * len(completions)


def make_trainer(model_dir: Path, tmp_path: Path, attention: str = "sdpa", dtype: torch.dtype = torch.float32,
                 beta: float = 0.04, num_iterations: int = 2) -> ReasonerGRPOTrainer:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=attention, dtype=dtype)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", bf16=False,
                      num_generations=2, per_device_train_batch_size=2, max_completion_length=8,
                      beta=beta, num_iterations=num_iterations, temperature=0.7)
    return ReasonerGRPOTrainer(model=model, reward_funcs=[zero_reward], args=args,
                               train_dataset=Dataset.from_list([{"prompt": "hi"}] * 2),
                               processing_class=AutoTokenizer.from_pretrained(model_dir))


def make_batch(prompt_lengths: list[int], generations: int, width: int, pad_id: int, eos_id: int,
               seed: int = 0, mask_truncated: bool = False) -> dict[str, torch.Tensor]:
    """TRL-shaped rows: ``generations`` completions per prompt, shuffled; the last two prompts differ
    only in their last token; row 0 of each group is truncated (full width, no EOS). With
    ``mask_truncated`` the first group's truncated row is masked out entirely, as TRL's
    ``mask_truncated_completions`` does."""
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(5, 300, (n,), generator=gen) for n in prompt_lengths]
    if len(prompts) >= 2 and prompt_lengths[-1] == prompt_lengths[-2]:
        prompts[-1] = prompts[-2].clone()
        prompts[-1][-1] = (prompts[-2][-1] + 1) % 300 + 5
    columns = max(prompt_lengths) + 2  # extra pad columns, as pad_to_multiple_of adds
    rows = len(prompts) * generations
    prompt_ids = torch.full((rows, columns), pad_id)
    prompt_mask = torch.zeros(rows, columns, dtype=torch.long)
    completion_ids = torch.full((rows, width), pad_id)
    completion_mask = torch.zeros(rows, width, dtype=torch.long)
    for row in range(rows):
        prompt = prompts[row // generations]
        prompt_ids[row, columns - prompt.numel():] = prompt
        prompt_mask[row, columns - prompt.numel():] = 1
        length = width if row % generations == 0 else int(torch.randint(1, width, (1,), generator=gen))
        completion_ids[row, :length] = torch.randint(5, 300, (length,), generator=gen)
        if length < width:
            completion_ids[row, length - 1] = eos_id
        completion_mask[row, :length] = 0 if (mask_truncated and row == 0) else 1
    order = torch.randperm(rows, generator=gen)  # TRL's shuffle_sequence_dict
    batch = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
             "completion_mask": completion_mask}
    return {key: value[order] for key, value in batch.items()}


def joined(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, int]:
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    return ids, mask, batch["completion_ids"].size(1)


def logps(trainer: ReasonerGRPOTrainer, model: Any, batch: dict[str, torch.Tensor], shared: bool,
          **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    trainer.shared_prefix_update = shared
    ids, mask, keep = joined(batch)
    with torch.no_grad():
        values, entropies, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, **kwargs)
    return values, entropies


class ForwardLog:
    """Shapes of the backbone's input_ids, to check which layout a path really ran."""

    def __init__(self, model: Any) -> None:
        self.shapes: list[tuple[int, int]] = []
        self.handle = model.model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        self.shapes.append(tuple(kwargs["input_ids"].shape))

    def take(self) -> list[tuple[int, int]]:
        shapes, self.shapes = self.shapes, []
        return shapes


def perturb(model: Any, seed: int, scale: float = 0.05) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=gen).to(param.dtype) * scale)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("generations", [2, 8])
def test_logps_and_entropies_equal_the_stock_path(tiny_lm_dir, tmp_path, attention, generations) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path, attention)
    tok = trainer.processing_class
    batch = make_batch([4, 11, 7, 7], generations, 9, tok.pad_token_id, tok.eos_token_id, mask_truncated=True)
    forwards = ForwardLog(trainer.model)

    stock = logps(trainer, trainer.model, batch, shared=False, compute_entropy=True)
    stock_shapes = forwards.take()
    shared = logps(trainer, trainer.model, batch, shared=True, compute_entropy=True)
    shared_shapes = forwards.take()

    torch.testing.assert_close(shared[0], stock[0], **FP32)
    torch.testing.assert_close(shared[1], stock[1], **FP32)
    assert bool((stock[0] != 0).any()) and bool((stock[0][batch["completion_mask"] == 0] == 0).all())
    # One packed sequence per prompt (4 prompts), fewer tokens than the 4 x G padded rows.
    assert shared_shapes[0][0] == 4 and stock_shapes[0][0] == 4 * generations
    assert math.prod(shared_shapes[0]) < math.prod(stock_shapes[0])


def test_chunked_reference_and_old_logps_equal_the_stock_path(tiny_lm_dir, tmp_path) -> None:
    # The reference model and the old log-probabilities are computed under no_grad with batch_size
    # (TRL's per-device batch) bounding each forward; the packed path then runs several forwards.
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    perturb(trainer.ref_model, seed=1)
    tok = trainer.processing_class
    batch = make_batch([6, 12, 9, 9], 4, 8, tok.pad_token_id, tok.eos_token_id, seed=3)
    forwards = ForwardLog(trainer.ref_model)
    for model in (trainer.ref_model, trainer.model):
        stock, _ = logps(trainer, model, batch, shared=False, batch_size=4)
        shared, entropies = logps(trainer, model, batch, shared=True, batch_size=4)
        torch.testing.assert_close(shared, stock, **FP32)
        assert entropies is None
    shapes = forwards.take()
    assert len(shapes) > 4 + 1 and shapes[-1][0] < 4  # stock: 4 chunks of 4 rows; packed: more than one


def loss_and_gradients(trainer: ReasonerGRPOTrainer, inputs: dict[str, Any],
                       shared: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    trainer.shared_prefix_update = shared
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in trainer.model.named_parameters()}


def grpo_inputs(trainer: ReasonerGRPOTrainer, batch: dict[str, torch.Tensor], shared: bool,
                seed: int) -> dict[str, Any]:
    """What _generate_and_score_completions hands the loss with beta > 0 and num_iterations > 1: old
    and reference log-probabilities, computed by the path under test."""
    rows = batch["prompt_ids"].size(0)
    old, _ = logps(trainer, trainer.model, batch, shared, batch_size=4)
    ref, _ = logps(trainer, trainer.ref_model, batch, shared, batch_size=4)
    advantages = torch.randn(rows, generator=torch.Generator().manual_seed(seed))
    return {**batch, "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ref,
            "num_items_in_batch": batch["completion_mask"].sum()}


def assert_gradients_close(shared: dict[str, torch.Tensor], stock: dict[str, torch.Tensor],
                           rtol: float) -> None:
    assert shared.keys() == stock.keys()
    assert sum(float(g.norm()) for g in stock.values()) > 0  # the comparison is not of zeros
    for name, grad in stock.items():
        # Relative to the tensor's largest entry, so that entries near zero do not demand more than
        # float32 gives (a sum of G row contributions in another order).
        torch.testing.assert_close(shared[name], grad, rtol=rtol, atol=rtol * float(grad.abs().max()),
                                   msg=lambda m, n=name: f"gradient of {n}: {m}")


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("generations", [2, 8])
def test_loss_and_every_gradient_equal_the_stock_path(tiny_lm_dir, tmp_path, attention, generations) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path, attention, beta=0.04, num_iterations=2)
    perturb(trainer.ref_model, seed=1)  # a reference that differs, so the KL term has a gradient
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8, 8], generations, 10, tok.pad_token_id, tok.eos_token_id, seed=generations,
                       mask_truncated=True)
    old_stock = grpo_inputs(trainer, batch, shared=False, seed=7)
    old_shared = grpo_inputs(trainer, batch, shared=True, seed=7)
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        torch.testing.assert_close(old_shared[key], old_stock[key], **FP32)
    perturb(trainer.model, seed=2, scale=0.01)  # the policy moved since generation: ratios differ from 1

    stock_loss, stock_grads = loss_and_gradients(trainer, old_stock, shared=False)
    shared_loss, shared_grads = loss_and_gradients(trainer, old_shared, shared=True)

    torch.testing.assert_close(shared_loss, stock_loss, rtol=1e-5, atol=0.0)
    assert_gradients_close(shared_grads, stock_grads, GRAD_RTOL_FP32)


def test_bf16_model_matches_within_bf16_rounding(tiny_lm_dir, tmp_path) -> None:
    # In bf16 the two layouts round differently (other matmul shapes and reduction orders), so only a
    # bf16-sized agreement is expected: measured ~5e-4 on log-probabilities and <1 % of each tensor's
    # largest gradient entry.
    trainer = make_trainer(tiny_lm_dir, tmp_path, dtype=torch.bfloat16, beta=0.0, num_iterations=1)
    tok = trainer.processing_class
    batch = make_batch([5, 12, 9], 4, 8, tok.pad_token_id, tok.eos_token_id, seed=5)
    stock, _ = logps(trainer, trainer.model, batch, shared=False)
    shared, _ = logps(trainer, trainer.model, batch, shared=True)
    torch.testing.assert_close(shared, stock, rtol=1e-2, atol=5e-3)
    inputs = {**batch, "advantages": torch.linspace(-1, 1, batch["prompt_ids"].size(0)),
              "num_items_in_batch": batch["completion_mask"].sum()}
    stock_loss, stock_grads = loss_and_gradients(trainer, inputs, shared=False)
    shared_loss, shared_grads = loss_and_gradients(trainer, inputs, shared=True)
    torch.testing.assert_close(shared_loss, stock_loss, rtol=1e-2, atol=1e-3)
    assert_gradients_close(shared_grads, stock_grads, rtol=3e-2)


def test_groups_are_found_by_prompt_tokens_not_row_order() -> None:
    ids = torch.tensor([[0, 7, 8], [5, 7, 8], [0, 7, 8], [5, 7, 9], [5, 7, 8], [0, 7, 9]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1]])
    groups = sorted(shared_prefix.find_groups(ids, mask))
    # [0, 7, 8] with the 0 as padding is another prompt than [5, 7, 8]; one token apart is not shared.
    assert groups == [[0, 2], [1, 4], [3], [5]]


class StockSpy:
    """Records calls of TRL's method (the fallback) and returns what it returns."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        self.call_through = True
        original = GRPOTrainer._get_per_token_logps_and_entropies

        def spy(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls.append(kwargs)
            if self.call_through:
                return original(trainer, *args, **kwargs)
            return torch.zeros(args[1].size(0), args[3]), None, None  # (B, logits_to_keep)

        monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", spy)


def stock_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "shared-prefix update not used" in r.getMessage()]


def test_unsupported_input_falls_back_with_the_reason_logged_once(tiny_lm_dir, tmp_path, monkeypatch,
                                                                  caplog) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 8], 2, 6, tok.pad_token_id, tok.eos_token_id)
    ids, _, _ = joined(batch)
    spy = StockSpy(monkeypatch)
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    for _ in range(2):  # Llama takes token_type_ids and ignores them; packing does not pass them on
        logps(trainer, trainer.model, batch, shared=True, token_type_ids=torch.zeros_like(ids))
    assert len(spy.calls) == 2 and "token_type_ids" in spy.calls[0]
    records = [r for r in caplog.records if "shared-prefix update not used" in r.getMessage()]
    assert len(records) == 1 and "token_type_ids" in records[0].getMessage()
    assert records[0].levelno == logging.WARNING
    assert len(trainer.stock_path_reasons) == 1 and "token_type_ids" in trainer.stock_path_reasons[0]


def test_unsupported_attention_and_layouts_take_the_stock_path(tiny_lm_dir, tmp_path, monkeypatch,
                                                               caplog) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    spy = StockSpy(monkeypatch)
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    holed = make_batch([5, 8], 2, 6, tok.pad_token_id, tok.eos_token_id)
    holed["completion_mask"][0, 0] = 0  # not TRL's right padding: packing would not be exact
    distinct = make_batch([5, 8, 6], 1, 6, tok.pad_token_id, tok.eos_token_id)  # groups of size 1
    for batch in (holed, distinct):
        stock, _ = logps(trainer, trainer.model, batch, shared=False)
        fallback, _ = logps(trainer, trainer.model, batch, shared=True)
        torch.testing.assert_close(fallback, stock, rtol=0, atol=0)
    # Not installed here, so TRL's method is not run for this one (the spy records the call instead).
    spy.call_through = False
    monkeypatch.setattr(trainer.model.config, "_attn_implementation", "flash_attention_2")
    logps(trainer, trainer.model, make_batch([5, 8], 2, 6, tok.pad_token_id, tok.eos_token_id), shared=True)
    assert len(spy.calls) == 5
    text = " | ".join(stock_messages(caplog))
    assert "hole" in text and shared_prefix.NO_SHARED_PROMPT in text and "flash_attention_2" in text
    # The stock runs above note the switch itself (OFF) as a reason too.
    assert set(trainer.stock_path_reasons) >= {shared_prefix.NO_SHARED_PROMPT, shared_prefix.OFF}
    assert len(trainer.stock_path_reasons) == 4


def test_recipe_switch_selects_the_path(tiny_recipe, monkeypatch) -> None:
    with pytest.raises(RecipeError, match="shared_prefix_update"):
        load_recipe(tiny_recipe(shared_prefix_update="yes"))
    used: list[bool] = []
    packed = shared_prefix.shared_prefix_logps

    def record(*args: Any, **kwargs: Any) -> Any:
        used.append(True)
        return packed(*args, **kwargs)

    monkeypatch.setattr(shared_prefix, "shared_prefix_logps", record)
    for enabled in (False, True):
        trainer, _ = build_trainer(load_recipe(tiny_recipe(shared_prefix_update=enabled)))
        assert trainer.shared_prefix_update is enabled
        tok = trainer.processing_class
        logps(trainer, trainer.model, make_batch([5, 8], 2, 6, tok.pad_token_id, tok.eos_token_id),
              shared=trainer.shared_prefix_update)
        assert used == ([True] if enabled else [])


def test_a_short_training_run_uses_the_shared_prefix_path(tiny_recipe, varying_reward, monkeypatch) -> None:
    # beta > 0 (reference model) and num_iterations = 2 (old log-probabilities): all three passes pack.
    calls: list[tuple[bool, bool]] = []
    packed = shared_prefix.shared_prefix_logps

    def record(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((model is trainer_holder[0].ref_model, torch.is_grad_enabled()))
        return packed(model, *args, **kwargs)

    trainer_holder: list[Any] = []
    original_init = ReasonerGRPOTrainer.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        trainer_holder.append(self)

    monkeypatch.setattr(ReasonerGRPOTrainer, "__init__", keep)
    monkeypatch.setattr(shared_prefix, "shared_prefix_logps", record)
    # true: the shared path whatever the first step's timing says (auto is tests/training/test_path_choice.py).
    recipe = load_recipe(tiny_recipe(rewards=[varying_reward, "format"], beta=0.04, num_iterations=2,
                                     save_steps=100, shared_prefix_update=True))
    summary = train(recipe)
    assert summary["global_step"] == 2 and math.isfinite(summary["train_loss"])
    assert (True, False) in calls  # reference model
    assert (False, False) in calls  # old log-probabilities of the policy
    assert (False, True) in calls  # the loss, with gradients


def test_packs_whose_attention_would_not_fit_take_the_per_row_path(tiny_lm_dir, tmp_path, monkeypatch) -> None:
    # A block mask keeps heads x length^2 attention probabilities per layer for the backward pass; over
    # the cap the memory-efficient per-row path is used, and only when gradients are kept.
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 9], 2, 6, tok.pad_token_id, tok.eos_token_id)
    ids, mask, keep = joined(batch)
    groups = shared_prefix.find_groups(ids[:, :-keep], mask[:, :-keep])
    held = shared_prefix.dense_attention_bytes(trainer.model, groups, mask, keep)
    config = trainer.model.config
    lengths = [shared_prefix.packed_length(g, mask[:, :-keep].sum(1).tolist(), mask[:, -keep:].sum(1).tolist())
               for g in groups]
    assert held == config.num_hidden_layers * config.num_attention_heads * sum(n * n for n in lengths) * 4
    monkeypatch.setattr(shared_prefix, "MAX_DENSE_ATTENTION_BYTES", held - 1)
    with torch.no_grad():
        assert shared_prefix.stock_path_reason(trainer.model, ids, mask, keep, False, {})[0] is None
    reason, _ = shared_prefix.stock_path_reason(trainer.model, ids, mask, keep, False, {})
    assert reason is not None and "backward pass" in reason


@pytest.mark.parametrize("compute_entropy", [True, False])
def test_the_compact_head_equals_trls_fused_head(tiny_lm_dir, tmp_path, compute_entropy) -> None:
    # On CPUs only the completion columns go through the LM head (shared_prefix.CompactHead); GPUs keep
    # TRL's fused head. Both give the same values and the same gradients; a pack too wide for the compact
    # head's logit budget falls back to the fused one.
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([4, 11, 7, 7], 4, 9, tok.pad_token_id, tok.eos_token_id, mask_truncated=True)
    ids, mask, keep = joined(batch)
    groups = shared_prefix.find_groups(ids[:, :-keep], mask[:, :-keep])
    head = shared_prefix.compact_head(trainer.model, ids.device, trainer.temperature, False)
    assert head is not None and head.temperature == trainer.temperature
    too_narrow = shared_prefix.CompactHead(trainer.temperature, max_logit_bytes=1)
    results = []
    for choice in (None, head, too_narrow):
        trainer.model.zero_grad(set_to_none=True)
        values, entropies = shared_prefix.shared_prefix_logps(trainer.model, ids, mask, keep, groups,
                                                              compute_entropy=compute_entropy, head=choice)
        (values.sum() + (entropies.sum() if compute_entropy else 0)).backward()
        results.append((values.detach(), entropies, {n: p.grad.clone() for n, p in trainer.model.named_parameters()}))
    (fused, fused_entropy, fused_grads), (compact, compact_entropy, compact_grads) = results[0], results[1]
    torch.testing.assert_close(compact, fused, **FP32)
    if compute_entropy:
        torch.testing.assert_close(compact_entropy.detach(), fused_entropy.detach(), **FP32)
    assert_gradients_close(compact_grads, fused_grads, GRAD_RTOL_FP32)
    torch.testing.assert_close(results[2][0], fused, rtol=0, atol=0)  # the fused head itself, bit for bit
    # Off the CPU, TRL's head (it scores only the completion positions there already).
    assert shared_prefix.compact_head(trainer.model, torch.device("cuda"), 1.0, False) is None


# Gemma 3 alternates sliding-window and global layers. Packing gives each layer type its own mask, the sliding
# layers' cut to the window, so rows wider than the window pack exactly (a single block mask would let the
# sliding layers see the whole prompt).
GEMMA3_WINDOW = 6


@pytest.fixture(scope="module")
def tiny_gemma3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_tokenizer
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = build_tiny_tokenizer()
    config = Gemma3TextConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                              sliding_window=GEMMA3_WINDOW,
                              layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                              pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                              bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config)
    perturb(model, seed=4, scale=0.2)  # away from the initial near-uniform logits and zero norms
    path = tmp_path_factory.mktemp("tiny_gemma3")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_gemma3_packs_rows_wider_than_its_window_exactly(tiny_gemma3_dir, tmp_path, attention) -> None:
    trainer = make_trainer(tiny_gemma3_dir, tmp_path, attention, beta=0.04, num_iterations=2)
    perturb(trainer.ref_model, seed=1)
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=6, mask_truncated=True)
    ids, mask, keep = joined(batch)
    assert ids.size(1) > 3 * GEMMA3_WINDOW
    assert shared_prefix.stock_path_reason(trainer.model, ids, mask, keep, False, {})[0] is None
    forwards = ForwardLog(trainer.model)
    stock = logps(trainer, trainer.model, batch, shared=False, compute_entropy=True)
    forwards.take()
    shared = logps(trainer, trainer.model, batch, shared=True, compute_entropy=True)
    assert forwards.take()[0][0] == 4  # one packed sequence per prompt: the packed path ran
    torch.testing.assert_close(shared[0], stock[0], **FP32)
    torch.testing.assert_close(shared[1], stock[1], **FP32)

    old_stock = grpo_inputs(trainer, batch, shared=False, seed=7)
    old_shared = grpo_inputs(trainer, batch, shared=True, seed=7)
    torch.testing.assert_close(old_shared["ref_per_token_logps"], old_stock["ref_per_token_logps"], **FP32)
    perturb(trainer.model, seed=2, scale=0.01)
    stock_loss, stock_grads = loss_and_gradients(trainer, old_stock, shared=False)
    shared_loss, shared_grads = loss_and_gradients(trainer, old_shared, shared=True)
    torch.testing.assert_close(shared_loss, stock_loss, rtol=1e-5, atol=0.0)
    assert_gradients_close(shared_grads, stock_grads, GRAD_RTOL_FP32)


def test_gemma3_packs_through_trls_fused_head_too(tiny_gemma3_dir, tmp_path) -> None:
    # Off the CPU the packed pass scores through TRL's fused LM head (no CompactHead): the per-layer-type masks
    # go the same way there.
    trainer = make_trainer(tiny_gemma3_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=8)
    ids, mask, keep = joined(batch)
    stock, _ = logps(trainer, trainer.model, batch, shared=False)
    groups = shared_prefix.find_groups(ids[:, :-keep], mask[:, :-keep])
    with torch.no_grad():
        fused, _ = shared_prefix.shared_prefix_logps(trainer.model, ids, mask, keep, groups, head=None)
    torch.testing.assert_close(fused, stock, **FP32)


@pytest.mark.parametrize(("attention", "window_layers", "layer_types"), [
    ("sdpa", 1, ["full_attention", "sliding_attention"]),
    ("eager", 1, ["full_attention", "sliding_attention"]),
    ("sdpa", 2, ["full_attention", "full_attention"]),
])
def test_qwen2_sliding_layers_pack_rows_wider_than_the_window(tmp_path, attention, window_layers,
                                                              layer_types) -> None:
    # Qwen2 with use_sliding_window marks the layers from max_window_layers on as sliding: the same per-layer-type
    # masks as Gemma 3. With max_window_layers at the depth no layer slides, and the window it keeps in its
    # config must not stop the packing.
    from tiny_models import build_tiny_tokenizer
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, use_sliding_window=True, sliding_window=5,
                         max_window_layers=window_layers, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    assert config.layer_types == layer_types and config.sliding_window == 5
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    perturb(model, seed=3, scale=0.2)
    model.save_pretrained(tmp_path / "qwen2")
    tokenizer.save_pretrained(tmp_path / "qwen2")
    trainer = make_trainer(tmp_path / "qwen2", tmp_path, attention)
    batch = make_batch([5, 13, 8], 4, 10, tokenizer.pad_token_id, tokenizer.eos_token_id, seed=9)
    ids, mask, keep = joined(batch)
    assert shared_prefix.stock_path_reason(trainer.model, ids, mask, keep, False, {})[0] is None
    forwards = ForwardLog(trainer.model)
    stock, _ = logps(trainer, trainer.model, batch, shared=False)
    forwards.take()
    shared, _ = logps(trainer, trainer.model, batch, shared=True)
    assert forwards.take()[0][0] == 3  # packed
    torch.testing.assert_close(shared, stock, **FP32)


def test_only_the_sliding_layers_mask_is_cut_to_the_window(tiny_gemma3_dir, tiny_lm_dir, tmp_path) -> None:
    from transformers import AutoModelForCausalLM, MistralConfig, MistralForCausalLM

    gemma = AutoModelForCausalLM.from_pretrained(tiny_gemma3_dir, attn_implementation="sdpa")
    segments = torch.tensor([[0] * 10 + [1, 1, 1, 2, 2, -1]])
    positions = torch.tensor([list(range(2, 12)) + [11, 12, 13, 11, 12, 0]])
    masks = shared_prefix.packed_masks(gemma.config, segments, positions, torch.float32)
    assert set(masks) == {"sliding_attention", "full_attention"}
    full, sliding = masks["full_attention"][0, 0], masks["sliding_attention"][0, 0]
    assert torch.equal(full, shared_prefix.block_mask(segments, "sdpa", torch.float32)[0, 0])
    # Block 1's last token (position 13) sees keys at positions 8..13 in the sliding layers: prompt columns
    # 6..9 (positions 8..11) and its own block, not block 2; the global layers see the whole prompt.
    assert sliding[12].nonzero().flatten().tolist() == [6, 7, 8, 9, 10, 11, 12]
    assert full[12].nonzero().flatten().tolist() == list(range(13))
    assert bool(sliding.any(-1).all())  # no query row is left without a key
    assert shared_prefix.unsupported_reason(gemma, 1000) is None
    # A model without sliding layers gets one mask, and Mistral (one mask for every layer) keeps refusing
    # rows wider than its window.
    llama = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, attn_implementation="sdpa")
    assert isinstance(shared_prefix.packed_masks(llama.config, segments, positions, torch.float32), torch.Tensor)
    mistral = MistralForCausalLM(MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                               num_attention_heads=2, num_key_value_heads=1, sliding_window=8,
                                               attn_implementation="sdpa"))
    assert shared_prefix.unsupported_reason(mistral, 8) is None
    assert "exceed the sliding window of 8" in shared_prefix.unsupported_reason(mistral, 9)
