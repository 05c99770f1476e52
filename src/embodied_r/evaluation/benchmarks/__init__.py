"""Benchmark loaders: each turns the files a user downloads into QARecords or prompt rows."""
