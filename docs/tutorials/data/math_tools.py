"""A TRL-style tool environment (docs/tutorials/tool_environment.md): the same class works as
``GRPOTrainer(environment_factory=MathTools)`` in TRL and as ``task.name=...math_tools.py:MathTools``
in rlvr."""


class MathTools:
    """Two integer tools and a count of the calls made in this episode."""

    def __init__(self):
        self.calls = 0

    def reset(self, **kwargs):
        """Called once per episode with the problem's columns; the text returned is appended to the prompt."""
        self.calls = 0
        return None

    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.calls += 1
        return a + b

    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.calls += 1
        return a * b
