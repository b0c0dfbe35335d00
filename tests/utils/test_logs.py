"""Logging configuration and the progress-bar decision (modsenc.utils.logs)."""

from __future__ import annotations

import io
import logging
import os
import sys

import pytest

from modsenc.utils import logs
from modsenc.utils.logs import PROGRESS_ENV, configure_logging, progress, progress_enabled


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch):
    """Each test starts unconfigured, outside a notebook, without MODSENC_PROGRESS; logging's
    global state is put back afterwards."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    root, ours = logging.getLogger(), logging.getLogger("modsenc")
    noisy = [logging.getLogger(name) for name in logs.IMPORT_NOISE]
    saved = (list(root.handlers), root.level, ours.level, dict(logs._state), [n.level for n in noisy])
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.setLevel(saved[2])
    logs._state.update(saved[3])
    for logger, level in zip(noisy, saved[4]):
        logger.setLevel(level)


def test_bars_only_on_an_interactive_stream() -> None:
    assert progress_enabled(_Terminal())
    assert not progress_enabled(io.StringIO())  # a log file or a pipe


def test_quiet_turns_bars_off_and_info_keeps_them(monkeypatch) -> None:
    configure_logging(logging.WARNING)
    assert not progress_enabled(_Terminal())
    configure_logging(logging.INFO)
    assert progress_enabled(_Terminal())
    configure_logging(logging.DEBUG)
    assert progress_enabled(_Terminal())


@pytest.mark.parametrize("value", ["1", "yes", "true"])
def test_environment_forces_bars_on(monkeypatch, value: str) -> None:
    monkeypatch.setenv(PROGRESS_ENV, value)
    configure_logging(logging.WARNING)
    assert progress_enabled(io.StringIO())


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_environment_forces_bars_off(monkeypatch, value: str) -> None:
    monkeypatch.setenv(PROGRESS_ENV, value)
    assert not progress_enabled(_Terminal())


def test_a_notebook_counts_as_interactive(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    assert progress_enabled(io.StringIO())


def test_progress_writes_nothing_to_a_non_interactive_stderr(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert list(progress(range(5), desc="encode")) == list(range(5))
    bar = progress(total=3, desc="train")
    bar.update(3)
    bar.close()
    assert err.getvalue() == ""
    monkeypatch.setenv(PROGRESS_ENV, "1")
    list(progress(range(5), desc="encode", mininterval=0))
    assert "\r" in err.getvalue()  # the bar that MODSENC_PROGRESS=1 forces redraws in place
    err.truncate(0)
    list(progress(range(5), desc="encode", enabled=False))  # the caller's own switch still wins
    assert err.getvalue() == ""


def test_configure_logging_levels_and_format(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)  # the handler writes to the sys.stderr of the moment
    configure_logging(logging.INFO)
    configure_logging(logging.INFO)  # again: replaces, does not add a second handler
    logging.getLogger("modsenc.training.loop").info("train step %d/%d", 1, 2)
    logging.getLogger("modsenc.training.loop").debug("hidden at INFO")
    logging.getLogger("somelibrary").info("other libraries' INFO is hidden")
    logging.getLogger("somelibrary").warning("their warnings are not")
    lines = err.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(" INFO train step 1/2") and lines[1].endswith(" WARNING their warnings are not")

    err.truncate(0)
    err.seek(0)
    configure_logging(logging.WARNING)
    logging.getLogger("modsenc.training.loop").info("quiet hides INFO")
    logging.getLogger("modsenc.training.loop").warning("but not warnings")
    assert err.getvalue().splitlines() == [err.getvalue().splitlines()[0]]
    assert err.getvalue().rstrip().endswith("WARNING but not warnings")

    err.truncate(0)
    err.seek(0)
    configure_logging(logging.DEBUG)
    logging.getLogger("modsenc.training.loop").debug("checkpoint written to x")
    assert err.getvalue().rstrip().endswith("DEBUG modsenc.training.loop: checkpoint written to x")
    assert logs.log_level_name() == "debug"


def test_import_time_warnings_of_torchao_show_with_verbose_only(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    configure_logging(logging.INFO)
    logging.getLogger("torchao").warning("Failed to load /x/_C_cutlass_90a.abi3.so")
    logging.getLogger("torch.utils._pytree").warning("register_constant() on Enum subclasses is deprecated")
    logging.getLogger("torchao").error("a real torchao error still shows")
    assert err.getvalue().splitlines()[0].endswith("ERROR a real torchao error still shows")
    assert len(err.getvalue().splitlines()) == 1
    configure_logging(logging.DEBUG)
    logging.getLogger("torchao").warning("Failed to load /x/_C_mxfp8.so")
    assert err.getvalue().rstrip().endswith("WARNING torchao: Failed to load /x/_C_mxfp8.so")


@pytest.fixture()
def no_switches(monkeypatch):
    for name in logs.THIRD_PARTY_BAR_SWITCHES:
        monkeypatch.setenv(name, "x")  # recorded, so the test's changes are undone afterwards
        monkeypatch.delenv(name)


def test_other_libraries_bars_follow_ours(monkeypatch, no_switches) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    logs.silence_third_party_bars()
    assert not any(name in os.environ for name in logs.THIRD_PARTY_BAR_SWITCHES)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # the user's own choice is kept
    logs.silence_third_party_bars()
    assert os.environ["TQDM_DISABLE"] == os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"


def test_importing_the_library_prints_nothing() -> None:
    """transformers imports torchao when it is installed, and torchao warns on a CPU build of torch."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    done = subprocess.run(
        [sys.executable, "-c", "from modsenc import ModularEncoder"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (done.stdout, done.stderr) == ("", "")
