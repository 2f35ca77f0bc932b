"""reel's errors as Python exceptions.

Every failure of the core carries a status code; each code is an exception class that derives from
:class:`reel.Error` and from the built-in exception Python code already catches for that kind of
failure, so ``except FileNotFoundError`` works as well as ``except reel.NotFoundError``.
The message is the one the ``reel`` command prints after ``reel COMMAND: CODE:``.
"""


class Error(Exception):
    """Base of every error reel reports; ``code`` is the core's status code name."""

    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    """A bad option, config field, shape or value (``INVALID_ARGUMENT``)."""

    code = "INVALID_ARGUMENT"


class NotFoundError(Error, FileNotFoundError):
    """A file, object, checkpoint or component that does not exist (``NOT_FOUND``)."""

    code = "NOT_FOUND"


class DataLossError(Error):
    """Corrupt data: a CRC mismatch, a truncated or unparsable record (``DATA_LOSS``)."""

    code = "DATA_LOSS"


class DeadlineExceededError(Error, TimeoutError):
    """A blocking call ran past its deadline (``DEADLINE_EXCEEDED``)."""

    code = "DEADLINE_EXCEEDED"


class UnavailableError(Error, ConnectionError):
    """A peer or server is gone or unreachable (``UNAVAILABLE``)."""

    code = "UNAVAILABLE"


class FailedPreconditionError(Error, RuntimeError):
    """The state does not allow the call, e.g. a workdir of another search (``FAILED_PRECONDITION``)."""

    code = "FAILED_PRECONDITION"


class PermissionDeniedError(Error, PermissionError):
    """Credentials refused (``PERMISSION_DENIED``)."""

    code = "PERMISSION_DENIED"


class UnimplementedError(Error, NotImplementedError):
    """An optional capability the component does not provide (``UNIMPLEMENTED``)."""

    code = "UNIMPLEMENTED"


class AlreadyExistsError(Error, FileExistsError):
    """A name that is taken (``ALREADY_EXISTS``)."""

    code = "ALREADY_EXISTS"


class InternalError(Error, RuntimeError):
    """A bug in reel: an invariant broke (``INTERNAL``)."""

    code = "INTERNAL"


class OutOfRangeError(Error, IndexError):
    """Past the end of the data (``OUT_OF_RANGE``)."""

    code = "OUT_OF_RANGE"


class CancelledError(Error):
    """The operation was cancelled (``CANCELLED``)."""

    code = "CANCELLED"


class Terminated(KeyboardInterrupt):
    """SIGTERM stopped :func:`reel.train` or :func:`reel.tune` after the checkpoint was written
    (the message names it): what Ctrl-C's ``KeyboardInterrupt`` is for SIGINT, so ``except
    KeyboardInterrupt`` catches both. Uncaught, it ends Python with a traceback and status 1
    (a plain KeyboardInterrupt makes Python end itself by SIGINT). docs/python.md."""

    signal = 15  # signal.SIGTERM


_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError, NotFoundError, DataLossError, DeadlineExceededError,
        UnavailableError, FailedPreconditionError, PermissionDeniedError, UnimplementedError,
        AlreadyExistsError, InternalError, OutOfRangeError, CancelledError,
    )
}


def from_status(code: str, message: str) -> Error:
    """The exception for a core status (called by the extension module)."""
    cls = _BY_CODE.get(code, Error)
    error = cls(message)
    error.code = code
    return error
