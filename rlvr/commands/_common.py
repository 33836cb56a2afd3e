"""Arguments shared by the training commands."""

from __future__ import annotations

import argparse


def add_config_args(p: argparse.ArgumentParser, default: str | None = None) -> None:
    p.add_argument("config", nargs="?", default=default,
                   help=f"YAML file or built-in config name (default: {default or 'the built-in defaults'})")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. loss.eps_high=0.28 train.steps=20")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--plain", action="store_true", help="plain progress lines and tables even on a terminal")


def progress_mode(args) -> str | None:
    return "none" if args.quiet else ("plain" if args.plain else None)


def split_config_and_overrides(args) -> tuple[str | None, list[str]]:
    """A first positional that looks like ``key=value`` is an override, not a config."""
    cfg, over = args.config, list(args.overrides)
    if cfg and "=" in cfg:
        return None, [cfg, *over]
    return cfg, over


def load_checked(path: str | None, overrides: list[str]):
    """``load_config`` then :func:`rlvr.train.validate.validate`: every command that takes a config
    checks it (types, ranges, registered names) before it creates a directory or loads a model."""
    from rlvr.config import load_config
    from rlvr.train.validate import validate

    cfg = load_config(path, overrides)
    validate(cfg)
    return cfg


def require_path(path, what: str, hint: str, *, hub_ok: bool = False, kind: str = "any") -> None:
    """UserError ``<what> <path> does not exist; <hint>`` unless ``path`` exists (``kind``: any | file |
    dir). ``hub_ok``: a model id that is no local path (``Qwen/Qwen2.5-0.5B``, ``tiny-hf:llama``) passes."""
    from pathlib import Path

    from rlvr.errors import UserError

    p = Path(str(path)).expanduser()
    if not p.exists():
        if hub_ok:
            from rlvr.model.io import looks_like_hf_name

            if looks_like_hf_name(str(path)):
                return
        raise UserError(f"{what} {path} does not exist; {hint}")
    if kind == "file" and not p.is_file():
        raise UserError(f"{what} {path} is a directory, not a file; {hint}")
    if kind == "dir" and not p.is_dir():
        raise UserError(f"{what} {path} is a file, not a directory; {hint}")
