"""GRPO training of the reasoner on top of TRL (see ``training.grpo``); recipes in ``training.recipe``."""
