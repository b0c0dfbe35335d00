"""The ``modsenc`` command group and the one place where errors become one-line messages."""

from __future__ import annotations

import logging
from typing import Any

import click

from modsenc.utils.errors import ModsencError
from modsenc.utils.logs import configure_logging, silence_third_party_bars

log = logging.getLogger("modsenc.cli")

# What a command reports in one line ("Error: MESSAGE", exit 1) instead of a traceback: modsenc's
# own errors, and the builtins that raise sites not yet moved to ModsencError raise for input the
# user can fix, as do the libraries underneath (OSError: a missing file, or what transformers and
# huggingface_hub raise for an unreachable model; ImportError: an extra that is not installed).
USER_ERRORS: tuple[type[BaseException], ...] = (
    ModsencError,
    OSError,
    KeyError,
    ValueError,
    TypeError,
    ImportError,
)


def one_line(err: BaseException) -> str:
    """The message for the user. A KeyError's str() wraps its message in quotes; its argument does not."""
    message = err.args[0] if isinstance(err, KeyError) and err.args else err
    return str(message)


class ModsencGroup(click.Group):
    """A click group whose commands (and sub-groups' commands) need no error handling of their own:
    a USER_ERRORS exception from any of them becomes a click error with its message."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as err:
            # The traceback still reaches --verbose: TypeError and KeyError are also what a bug raises.
            log.debug("the command failed", exc_info=True)
            raise click.ClickException(one_line(err)) from err


@click.group(
    cls=ModsencGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(package_name="modsenc")
@click.option("-v", "--verbose", is_flag=True, help="Debug messages too.")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only, no progress bars.")
def main(verbose: bool, quiet: bool) -> None:
    """modsenc: modular multilingual sentence encoders.

    \b
    A backbone:     train-backbone (MEXMA; EMS, EMMA-X, contrastive), import-backbone (e5, LaBSE, ...)
    Its languages:  add-language LANG puts one bundle of modules per language in a zoo
    A zoo:          encode, serve, export, zoo list, zoo info
    A corpus:       scale encode, scale mine (on Ray, one machine or a cluster)
    Measure:        eval, compare, mine; finetune trains the full-parameter baselines
    Data:           synthesize machine-translates English paraphrase pairs for add-language

    Commands that take --zoo default to adapters_zoo (in the working directory), or $MODSENC_ZOO.

    Messages go to stderr. Progress bars are drawn on a terminal only; in a log file or a pipe
    training logs a line every log_every steps instead (MODSENC_PROGRESS=1 forces bars on).
    """
    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet exclude each other")
    configure_logging(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    silence_third_party_bars()
