"""One or two readable lines for an error that ended a Spark query.

A failure inside the operator reaches the driver as a StreamingQueryException whose message holds
the Python worker's traceback, Java stack frames and often the query plan: thousands of characters
around the one line that says what went wrong.  The CLI prints that line (the full text stays
behind ``--debug``)."""
from __future__ import annotations

import re

#: The last line of a Python traceback: ``module.ErrorName: message`` (the message may run on).
_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit|Interrupt)): (.*)$")
#: Spark's suffix on an error class's message.
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
#: Where Spark appends the JVM side of the story.
_JVM_TAIL = re.compile(r"\n\s*(?:at |JVM stacktrace:|=== Streaming Query ===|Caused by:|\tat )")


#: First lines that say only where a JVM error was met (a py4j call); the cause is further down.
_WRAPPERS = ("An error occurred while calling", "Py4JJavaError")
#: A JVM exception's line: ``[Caused by: ]java.Class: message``.
_JVM_ERROR = re.compile(r"^(?:Caused by: |: )?([\w.$]+(?:Exception|Error)): (.*)$")
#: Spark's error classes that only wrap another error.
_WRAPPING_CLASSES = ("[FOREACH_BATCH_USER_FUNCTION_ERROR]", "[STREAM_FAILED]")


def _first_cause(text: str) -> "str | None":
    """The first message of a JVM error's chain with one of Spark's error classes (``[CLASS] ...``)
    that does not only wrap another, else the chain's last (root) cause; None if there is none."""
    found = [match.group(2).strip() for match in map(_JVM_ERROR.match, (line.strip() for line in text.splitlines()))
             if match is not None and match.group(2).strip()]
    classed = [message for message in found if message.startswith("[") and not message.startswith(_WRAPPING_CLASSES)]
    if classed:
        return _SQLSTATE.sub("", classed[0])
    return _SQLSTATE.sub("", found[-1]) if found else None


def error_summary(exc: BaseException) -> str:
    """The error's own message: the innermost Python error of a worker traceback when there is
    one, otherwise the first line of the message, with Spark's error class prefix kept."""
    text = str(exc)
    if "Traceback (most recent call last)" in text:
        python_part = text[text.rindex("Traceback (most recent call last)"):]
        python_part = _JVM_TAIL.split(python_part, maxsplit=1)[0]
        lines = python_part.splitlines()
        for i in range(len(lines) - 1, -1, -1):
            match = _PYTHON_ERROR.match(lines[i].strip())
            if match:
                rest = []
                for line in lines[i + 1:]:  # a message may run over lines, up to a blank one
                    if not line.strip():
                        break
                    rest.append(line.strip())
                message = _SQLSTATE.sub("", " ".join([match.group(2).strip(), *rest]))
                return f"{match.group(1)}: {message}"
    first = _SQLSTATE.sub("", next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__))
    if first.startswith(_WRAPPERS):  # (a py4j call's error: its first line names the call, not the cause)
        cause = _first_cause(text)
        if cause is not None:
            return cause
    name = type(exc).__name__
    return first if first.startswith(("[", name)) else f"{name}: {first}"  # Spark's "[ERROR_CLASS] ..." names itself
