"""Arguments shared by the training commands."""

from __future__ import annotations

import argparse


class DefaultConfig(str):
    """The config name a command uses when none is given: a ``str`` that remembers it was not typed
    (``--resume`` refuses a config the user gave, not the default)."""


def add_config_args(p: argparse.ArgumentParser, default: str | None = None) -> None:
    p.set_defaults(default_config=default)
    p.add_argument("config", nargs="?", default=DefaultConfig(default) if default else None,
                   help=f"YAML file or built-in config name (default: {default or 'the built-in defaults'})")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. loss.eps_high=0.28 train.steps=20")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--plain", action="store_true", help="plain progress lines and tables even on a terminal")


def progress_mode(args) -> str | None:
    return "none" if args.quiet else ("plain" if args.plain else None)


def split_config_and_overrides(args) -> tuple[str | None, list[str]]:
    """A first positional that looks like ``key=value`` is an override, not a config: the command's
    default config (``rlvr train train.steps=5`` is quickstart with 5 steps, as the help says) takes
    its place."""
    cfg, over = args.config, list(args.overrides)
    if cfg and "=" in cfg:
        return getattr(args, "default_config", None), [cfg, *over]
    return cfg, over


def add_run_dir_args(p: argparse.ArgumentParser, resume_help: str) -> None:
    """``--run-dir``, ``--overwrite`` and ``--resume`` of a command that writes a run folder."""
    p.add_argument("--run-dir", help="write the run here instead of train.out_dir/<name>-<time> (a new or "
                   "empty folder: a run folder belongs to one run)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --run-dir: delete what the folder holds first (it says what it removes)")
    p.add_argument("--resume", metavar="RUN_DIR", help=resume_help)


def refuse_config_on_resume(args) -> None:
    """``--resume`` continues a run with exactly its saved config.yaml: a config name or overrides
    given beside it (which would change the run midway, or be silently dropped) are a UserError."""
    from rlvr.errors import UserError

    given = [] if args.config is None or isinstance(args.config, DefaultConfig) else [args.config]
    given += list(args.overrides)
    if given:
        raise UserError(f"--resume continues {args.resume} with its saved config.yaml; {' '.join(given)} would "
                        "change the run midway: drop it (to train longer use --steps N; for another config "
                        "start a new run)")
    if args.run_dir:
        raise UserError(f"--resume {args.resume} writes into that run's folder; drop --run-dir {args.run_dir}")
    if args.overwrite:
        raise UserError("--overwrite starts a new run in a used folder; --resume continues one: drop one of them")


def check_resumable(run, extra_steps: int | None = None):
    """The saved config of the run folder ``run``, checked as a new run's would be (with ``extra_steps``
    as its step target, not recorded yet), before anything is built or written."""
    from rlvr.train.resume import check_fits, saved_config, steps_target
    from rlvr.train.validate import validate

    require_path(run, "--resume", "pass the run directory `rlvr train` created", kind="dir")
    cfg = saved_config(run)
    validate(steps_target(run, cfg, extra_steps, record=False))
    check_fits(run, cfg)
    return cfg


def check_run_dir(run_dir, cfg, overwrite: bool = False) -> None:
    """A new run's folder can be written: ``--run-dir`` (a non-empty one refused unless ``overwrite``)
    or ``train.out_dir``; checked before any model is built."""
    from pathlib import Path

    from rlvr.paths import claim_new_dir

    if not run_dir:
        check_output(cfg.train.out_dir, "train.out_dir", "dir")
        return
    check_output(run_dir, "--run-dir", "dir")
    p = Path(run_dir)
    if not overwrite and p.is_dir():
        claim_new_dir(p, False)  # raises when it holds anything, naming what


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


def check_output(path, flag: str, kind: str = "file") -> None:
    """Fail before any work when ``path`` cannot be written: a folder where a file is asked for (or
    the reverse), a file in the middle of the path, or a folder this user may not write in (read-only
    file systems included; root passes permission checks, so a later OS error is still possible and
    :func:`rlvr.cli.main` makes it one line). ``kind``: file | dir."""
    import os
    from pathlib import Path

    from rlvr.errors import UserError

    p = Path(str(path)).expanduser()
    if kind == "file" and p.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file path (e.g. {Path(path) / 'out.json'})")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise UserError(f"{flag} {path} is a file, not a folder; give a folder path")
    folder = p if kind == "dir" else p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is a file, not a folder; give a path inside a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot write in {folder} (read-only or no permission); choose a folder "
                        "you can write to")
