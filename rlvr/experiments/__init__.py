"""Declared experiments: each paper finding as a grid of cells, evaluations and claims whose
verdicts are computed from the measured table (``rlvr reproduce``; docs/reproductions/)."""
