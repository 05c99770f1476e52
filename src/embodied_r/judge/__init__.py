"""The consistency judge: a model that reads a question and someone's reasoning and says which option the
reasoning leads to (Embodied-R's logical-consistency reward, the consistency rate in evaluation).

- ``judges``: the judge protocol, its prompt, a local model (``ReferenceJudge``), an OpenAI-compatible
  endpoint (``OpenAIJudge``) and ``build_judge`` from a spec; ``letter_mask`` hides option letters;
- ``shuffled_options``: the rule that re-reads a think with the options shuffled and relabelled;
- ``probe``, ``probe_cases``, ``probe_phrasings``, ``reference_judges``: the probe a judge passes before
  it is trusted, its cases, and the parameter-free judges that calibrate it;
- ``rate``: a judge's verdicts on completions (the reward's and evaluation's), and the consistency rate;
- ``identity``: flags for a rate that would be circular (the judge is the one training optimised);
- ``settings``: the recipe section ``judge``.

The reward itself is Embodied-R's (``methods.embodied_r.consistency``); training's probe gate is
``training.judge_gate``. Nothing is imported here at package import time; import the submodules you need.
"""
