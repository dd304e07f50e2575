"""Check the interpreter that runs this script against pyproject.toml's requires-python.

The Makefile runs it with $(PYTHON) before it creates a venv, so a wrong Python fails in one
line instead of half-way through the install (apsw, among others, has no wheel for it):

    python3 scripts/check_python.py --name python3   # one line on stderr and exit 1 if out of range
    python3 scripts/check_python.py --id             # "<resolved interpreter path> <version>"

`--id` is what the Makefile records in .venv's stamp: when $(PYTHON) reports another id, the
venv was made by another interpreter and is rebuilt from scratch.

The candidate may be any old Python, so this file keeps to syntax every Python 3 (and 2.7)
parses: no f-strings, annotations or walrus, nothing outside the standard library.
"""

import os
import re
import sys

PYPROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
_CLAUSE = re.compile(r"^(~=|==|!=|<=|>=|<|>)\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?$")


def requires_python(text):
    """The requires-python value of a pyproject.toml text (an empty string when absent)."""
    found = re.search(r"""^requires-python\s*=\s*["']([^"']*)["']""", text, re.MULTILINE)
    return found.group(1).strip() if found else ""


def _padded(parts, length=3):
    return tuple(parts) + (0,) * (length - len(parts))


def satisfies(version, spec):
    """Whether a (major, minor, micro) version meets a requires-python specifier."""
    have = tuple(version[:3])
    for raw in spec.split(","):
        clause = raw.strip()
        if not clause:
            continue
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError("unsupported requires-python clause: " + repr(clause))
        op, number, star = match.groups()
        want = tuple(int(part) for part in number.split("."))
        if star and op not in ("==", "!="):
            raise ValueError("unsupported requires-python clause: " + repr(clause))
        if op in ("==", "!=") and star:
            equal = have[: len(want)] == want
        elif op in ("==", "!="):
            equal = have == _padded(want)
        if op == "==":
            ok = equal
        elif op == "!=":
            ok = not equal
        elif op == ">=":
            ok = have >= _padded(want)
        elif op == ">":
            ok = have > _padded(want)
        elif op == "<=":
            ok = have <= _padded(want)
        elif op == "<":
            ok = have < _padded(want)
        else:  # ~=X.Y: >= X.Y and == X.*
            ok = have >= _padded(want) and have[: len(want) - 1] == want[:-1]
        if not ok:
            return False
    return True


def interpreter_id():
    """The interpreter's resolved path and version; a venv's python reports its base's path."""
    executable = getattr(sys, "_base_executable", None) or sys.executable
    version = ".".join(str(part) for part in sys.version_info[:3])
    return os.path.realpath(executable) + " " + version


def main(argv):
    if "--id" in argv:
        sys.stdout.write(interpreter_id() + "\n")
        return 0
    name = argv[argv.index("--name") + 1] if "--name" in argv[:-1] else sys.executable
    with open(PYPROJECT) as fh:
        spec = requires_python(fh.read())
    if not spec:
        return 0
    version = tuple(sys.version_info[:3])
    if satisfies(version, spec):
        return 0
    shown = ".".join(str(part) for part in version)
    sys.stderr.write(
        "governed-evidence needs Python "
        + spec
        + " (requires-python in pyproject.toml), but PYTHON="
        + name
        + " is Python "
        + shown
        + "; name one that is, e.g. make PYTHON=python3.11 install\n"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
