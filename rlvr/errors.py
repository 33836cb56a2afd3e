"""The one exception type that the CLI turns into a clean one-line error, and the one line an OS error
becomes (:func:`os_error_line`)."""

import errno


class UserError(Exception):
    """Bad input from the user (config, path, file contents, arguments).

    The message must name the problem and the fix; the CLI prints it as
    ``error: <message>`` and exits with status 2, without a traceback.
    """


class PipelineError(RuntimeError):
    """The async pipeline or a data-parallel step cannot go on (a worker crashed for good, a wait timed out)."""


class PipelineTimeout(PipelineError, TimeoutError):
    """A queue wait, weight sync, worker call or collective took longer than ``pipeline.timeout_s``."""


_OS_FIXES = {
    "EACCES": "check its permissions, or choose a folder you can write to",
    "EPERM": "check its permissions, or choose a folder you can write to",
    "EROFS": "that file system is read-only; choose a folder on a writable one",
    "ENOSPC": "the disk is full; free space and rerun the same command (files already written are whole: "
              "writes are atomic, and runs and evaluations resume)",
    "EDQUOT": "the disk quota is used up; free space and rerun the same command",
    "EFBIG": "the file is over the size limit (ulimit -f); raise it or choose another disk, then rerun",
    "EISDIR": "it is a folder; give a file path",
    "ENOTDIR": "a part of that path is a file, not a folder; give a path inside a folder",
    "ENOENT": "no such file or folder; check the path",
    "EEXIST": "something is already there; give another path",
    "ENAMETOOLONG": "the name is too long; give a shorter path",
    "ELOOP": "too many symbolic links; give the real path",
}


def os_error_line(e: OSError) -> str:
    """One line for an OS error a user can cause (a read-only folder, a full disk, a file where a
    folder should be): the path, the system's reason and the fix."""
    name = errno.errorcode.get(e.errno or 0, "")
    path = e.filename if e.filename is not None else "a file"
    if e.filename2 is not None:
        path = f"{e.filename} -> {e.filename2}"
    fix = _OS_FIXES.get(name, "check the path and rerun")
    return f"{path}: {e.strerror or e} ({name or type(e).__name__}); {fix}"
