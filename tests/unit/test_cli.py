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
