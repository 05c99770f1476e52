"""Evaluation: metrics, benchmark loaders, the batched runner and reports."""
