"""Replacing the mirror folder whole: the new one appears in one step, or the old one stays.

On Linux, ``renameat2(RENAME_EXCHANGE)`` swaps the two folders atomically: a reader sees the
old mirror or the new one, never neither. Elsewhere (or on a file system that refuses it),
two renames with the old folder kept as ``.NAME.previous`` until the new one is in place;
:func:`recover` puts it back if the process died between the two.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import sys
from pathlib import Path

__all__ = ["previous_of", "recover", "replace_folder", "staging_prefix"]

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def previous_of(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.previous"


def staging_prefix(folder: Path) -> str:
    return f".{folder.name}.staging-"


def _exchange(a: Path, b: Path) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def replace_folder(new: Path, folder: Path) -> None:
    """Put ``new`` in place of ``folder`` (which may not exist yet) and delete the old one."""
    previous = previous_of(folder)
    if folder.exists() and _exchange(new, folder):
        shutil.rmtree(new, ignore_errors=True)
        return
    if folder.exists():
        shutil.rmtree(previous, ignore_errors=True)
        os.rename(folder, previous)
    os.rename(new, folder)
    shutil.rmtree(previous, ignore_errors=True)


def recover(folder: Path) -> None:
    """Undo what an interrupted sync left: the last good mirror back in place, staging removed."""
    previous = previous_of(folder)
    if not folder.exists() and previous.is_dir():
        os.rename(previous, folder)
    shutil.rmtree(previous, ignore_errors=True)
    if folder.parent.is_dir():
        for leftover in folder.parent.glob(staging_prefix(folder) + "*"):
            shutil.rmtree(leftover, ignore_errors=True)
