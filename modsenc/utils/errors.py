"""modsenc's exception hierarchy: one base the command line reports in one line.

Every class below also derives from the builtin exception it stands for, so code (and tests) that
catch ``ValueError``, ``FileNotFoundError`` ... keep working while raise sites move over to these.
``utils`` is the lowest layer, so every part of the package can raise them.
"""

from __future__ import annotations


class ModsencError(Exception):
    """Base of every error modsenc raises on purpose: a problem the user can fix, whose message is
    one line naming what is wrong (the CLI prints it after "Error:" and exits 1)."""


class InputError(ModsencError, ValueError):
    """A file, recipe or argument whose content is wrong (malformed data, bad values)."""


class IntegrityError(InputError):
    """A file that differs from the hash or shape its manifest records (altered, truncated)."""


class RuntimeFaultError(ModsencError, RuntimeError):
    """A runtime other than the reference one (torch) computed wrong values (NaN or inf) where the
    reference gives finite ones: the runtime's fault, not the bundle's."""


class MissingFileError(ModsencError, FileNotFoundError):
    """A file or folder the operation needs is not there."""


class OutputExistsError(ModsencError, FileExistsError):
    """An output the operation must not write (it exists, or would overwrite an input)."""


class UnknownNameError(ModsencError, KeyError):
    """A name (language, module, prompt) that is not installed or defined.

    KeyError's ``str()`` quotes its message; this one prints it as it is.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(ModsencError, ImportError):
    """An optional dependency (an extra such as ``modsenc[eval]``) is not installed; the message
    says what to install."""
