"""The small-LM reasoner: prompt templates, answer parsing, model loading."""
