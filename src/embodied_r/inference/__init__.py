"""Model-facing pieces shared by every method: model loading, batched generation, context policy and the
OpenAI-compatible HTTP client (the consistency judge is ``embodied_r.judge``).

Nothing is imported here at package import time; import the submodules you need.
"""
