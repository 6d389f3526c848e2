"""Where the emulated node keeps its files: everything lives under the repo's build/ folder."""

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
