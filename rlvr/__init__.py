"""rlvr: reinforcement learning from verifiable rewards, end to end."""

__version__ = "0.1.0"
