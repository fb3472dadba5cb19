"""Errors that reach a user. Each names where the problem is (file, line, field), what was expected,
and how to fix it, so that a bad request never needs a traceback to be understood."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class DatafarmError(Exception):
    """Base class for every error datafarm reports to a user; `exit_code` is the CLI's exit status."""

    exit_code: int = 1


@dataclass
class Problem:
    """One thing wrong with an input: where it is, what is wrong, what was expected, how to fix it."""

    message: str
    """What is wrong, in plain words."""
    file: Path | None = None
    """The file the problem is in, when there is one."""
    line: int | None = None
    """1-based line in `file`, when the parser knows it."""
    column: int | None = None
    """1-based column in `file`, when the parser knows it."""
    field: str | None = None
    """Dotted path of the offending field, e.g. `roles.author.provider`."""
    expected: str | None = None
    """What a valid value looks like."""
    hint: str | None = None
    """How to fix it, e.g. the closest valid key for a misspelled one."""

    def render(self) -> str:
        """Format as `file:line: field: message (expected ...) hint`, omitting what is unknown."""
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        text = where
        if self.field:
            text += f"{self.field}: "
        text += self.message
        if self.expected:
            text += f" (expected {self.expected})"
        if self.hint:
            text += f"; {self.hint}"
        return text


@dataclass
class InputError(DatafarmError):
    """Bad user input (request, clip, task folder): one or more problems; CLI exit code 2."""

    problems: list[Problem] = field(default_factory=list)
    """Everything found wrong, in file order where known."""
    exit_code: int = 2

    def __post_init__(self) -> None:
        super().__init__(self.render())

    def render(self) -> str:
        """All problems, one per line."""
        return "\n".join(p.render() for p in self.problems)

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self):
        # Exceptions pickle through their args by default, which would drop `problems`; process
        # pools need the whole error back in the parent.
        return (type(self), (self.problems, self.exit_code))


def input_error(message: str, **where: object) -> InputError:
    """Shorthand for an InputError with a single Problem (keyword args as in `Problem`)."""
    return InputError([Problem(message, **where)])  # type: ignore[arg-type]


class StateError(DatafarmError):
    """The on-disk state refuses the operation (e.g. a task folder exists and --resume was not given)."""

    exit_code = 3


class IntegrityError(DatafarmError):
    """Recorded data failed an integrity check (hash chain, file hash, capability lock)."""

    exit_code = 4
