"""rlvr: reinforcement learning from verifiable rewards, end to end."""

from importlib import metadata


def _installed_version() -> str:
    """The version pip installed (``project.version`` in pyproject.toml, the one place it is written);
    ``0+unknown`` when this source tree is imported without being installed."""
    try:
        return metadata.version("rlvr")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()
