"""``rlvr`` command line: one subcommand per module in :mod:`rlvr.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys

import rlvr
from rlvr.commands import COMMANDS
from rlvr.errors import UserError, os_error_line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr",
        description="Train, evaluate and analyse language models with RL from verifiable rewards.",
    )
    parser.add_argument("--version", action="version", version=f"rlvr {rlvr.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"rlvr.commands.{name}")
        except ModuleNotFoundError as e:  # a command whose module is not written yet
            if e.name == f"rlvr.commands.{name}":
                continue
            raise
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=mod.HELP,
            epilog=getattr(mod, "EPILOG", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may come after options (``rlvr train quickstart --variants a,b x.y=1``)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout closed early (``rlvr collapse ... | head``): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except UnicodeDecodeError as e:  # a binary file where text was expected, read where no reader names it
        print(f"error: an input file is not UTF-8 text ({e.reason} at byte {e.start}); give a text file",
              file=sys.stderr)
        return 2
    except OSError as e:  # a read-only folder, a full disk, a file where a folder should be
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
