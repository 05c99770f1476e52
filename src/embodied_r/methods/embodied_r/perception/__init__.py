"""VLM perception: describe each key frame of a question's video as text (Embodied-R §3).

- ``prompts``: the official-v1 and json-v1 perception prompts; ``entities``: what json-v1 shows.
- ``backends``: the ``PerceptionBackend`` protocol and the oracle; ``local_vlm`` holds the local-model
  backend (the HTTP one is ``embodied_r.inference.openai_client``, shared with the
  judges); ``factory.make_backend`` builds any of them by name.
- ``parsing``: VLM answers -> frames, plus answer-leak detection; ``cache``: on-disk request cache.
- ``runner``: QARecords + key frames -> ``Perception`` records. (A loopback OpenAI-compatible server
  for tests and benchmarks lives in ``tests/fake_vlm_server.py``.)
- ``stage``: the runner and the key-frame images as evaluation reaches them, through ``Method``.

Nothing heavy is imported here; import the submodule you need.
"""
