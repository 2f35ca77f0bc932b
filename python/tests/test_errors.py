"""reel.errors: each status code of the core is the built-in exception of its kind."""

import pytest

import reel
from reel.errors import from_status


@pytest.mark.parametrize("code,builtin", [
    ("INVALID_ARGUMENT", ValueError), ("NOT_FOUND", FileNotFoundError),
    ("DEADLINE_EXCEEDED", TimeoutError), ("UNAVAILABLE", ConnectionError),
    ("FAILED_PRECONDITION", RuntimeError), ("PERMISSION_DENIED", PermissionError),
    ("UNIMPLEMENTED", NotImplementedError), ("ALREADY_EXISTS", FileExistsError),
    ("INTERNAL", RuntimeError), ("OUT_OF_RANGE", IndexError),
])
def test_codes_are_builtin_exceptions(code, builtin):
    e = from_status(code, "what failed")
    assert isinstance(e, builtin) and isinstance(e, reel.Error)
    assert e.code == code and str(e) == "what failed"


def test_data_loss_is_reels_own():
    e = from_status("DATA_LOSS", "f.tfrecord: offset 12: data CRC mismatch")
    assert type(e) is reel.DataLossError and not isinstance(e, OSError)


def test_configure_after_first_use_is_refused():
    reel.plugins()  # the host exists now
    with pytest.raises(RuntimeError, match="configure"):
        reel.configure(plugin_dirs=["/nowhere"])
    with pytest.raises(TypeError, match="plugin_dirs"):
        reel.configure(plugin_dirs=[3])


def test_plugins_come_from_the_builds_lib_reel_plugins():
    names = {p["name"] for p in reel.plugins()}
    assert {"tfrecord", "moe"} <= names
    for p in reel.plugins():
        assert "/lib/reel/plugins/" in p["path"]


def test_help_describes_train():
    assert "callbacks" in reel.train.__doc__ and "KeyboardInterrupt" in reel.train.__doc__
