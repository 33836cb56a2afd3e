"""The ``rlvr`` entry point itself: ``--version``."""

from __future__ import annotations

from importlib import metadata

import pytest

import rlvr
from rlvr.cli import main


def test_version_prints_the_installed_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rlvr {metadata.version('rlvr')}"


def test_version_of_a_source_tree_that_is_not_installed(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert rlvr._installed_version() == "0+unknown"


def test_an_override_in_the_config_place_keeps_the_commands_default_config():
    """b87d620: `rlvr train train.steps=5` trained the built-in defaults, not quickstart as the help says."""
    from rlvr.cli import build_parser
    from rlvr.commands._common import split_config_and_overrides

    for argv, default in ((["train", "train.steps=5"], "quickstart"), (["pretrain", "pretrain.tokens=9"], "quickstart"),
                          (["excursions", "excursions.steps=2"], "excursions")):
        args = build_parser().parse_args(argv)
        assert split_config_and_overrides(args) == (default, [argv[1]])
    args = build_parser().parse_args(["train", "dapo", "train.steps=5"])
    assert split_config_and_overrides(args) == ("dapo", ["train.steps=5"])
