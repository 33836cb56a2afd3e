"""Arguments shared by the training commands."""

from __future__ import annotations

import argparse


def add_config_args(p: argparse.ArgumentParser, default: str | None = None) -> None:
    p.add_argument("config", nargs="?", default=default,
                   help=f"YAML file or built-in config name (default: {default or 'the built-in defaults'})")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. loss.eps_high=0.28 train.steps=20")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")


def progress_mode(args) -> str | None:
    return "none" if args.quiet else ("plain" if args.plain else None)


def split_config_and_overrides(args) -> tuple[str | None, list[str]]:
    """A first positional that looks like ``key=value`` is an override, not a config."""
    cfg, over = args.config, list(args.overrides)
    if cfg and "=" in cfg:
        return None, [cfg, *over]
    return cfg, over
