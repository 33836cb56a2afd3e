"""CLI subcommands. Each module defines ``HELP`` (one line), ``EPILOG`` (examples),
``add_arguments(parser)`` and ``run(args) -> int``. Keep top-level imports light
(no torch at import time) so ``rlvr --help`` is instant."""

COMMANDS = [
    "run",
    "pretrain",
    "train",
    "eval",
    "fit",
    "weights",
    "collapse",
    "excursions",
    "reproduce",
    "report",
    "compare",
    "config",
]
