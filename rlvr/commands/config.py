"""``rlvr config show``: print the resolved configuration."""

from __future__ import annotations

HELP = "Print the resolved config (defaults < YAML < overrides)."
EPILOG = """examples:
  rlvr config show
  rlvr config show scalerl loss.eps_max=8
  rlvr config show configs/grpo.yaml train.steps=10
"""


def add_arguments(p) -> None:
    p.add_argument("action", choices=["show"], help="what to do (show)")
    p.add_argument("config", nargs="?", default=None, help="YAML file or built-in config name")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. loss.eps_high=0.28")


def run(args) -> int:
    from rlvr.commands._common import load_checked, split_config_and_overrides
    from rlvr.config import dump_yaml

    path, over = split_config_and_overrides(args)
    print(dump_yaml(load_checked(path, over)), end="")
    return 0
