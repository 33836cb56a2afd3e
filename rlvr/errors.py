"""The one exception type that the CLI turns into a clean one-line error."""


class UserError(Exception):
    """Bad input from the user (config, path, file contents, arguments).

    The message must name the problem and the fix; the CLI prints it as
    ``error: <message>`` and exits with status 2, without a traceback.
    """


class PipelineError(RuntimeError):
    """The async pipeline or a data-parallel step cannot go on (a worker crashed for good, a wait timed out)."""


class PipelineTimeout(PipelineError, TimeoutError):
    """A queue wait, weight sync, worker call or collective took longer than ``pipeline.timeout_s``."""
