"""Where the emulated node keeps its files: everything lives under the repo's build/ folder."""

import fcntl
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_dir():
    return Path(os.environ.get("GDRPEER_BUILD_DIR", REPO / "build"))


def cache_dir():
    """Downloads and unpacked kernels; kept between runs so a second run fetches nothing."""
    d = Path(os.environ.get("GDRPEER_CACHE_DIR", build_dir() / "cache"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_lock(path):
    """Wait for the exclusive lock on file `path` (made, with its folder, if missing), so that one
    process at a time builds or fetches what it guards; the lock goes with os.close() of the fd
    returned."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
