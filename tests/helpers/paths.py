"""Where the tests find the tree's parts."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The shipped rule data (installed as <prefix>/share/gdrpeer/topology, GDRPEER_DATA_DIR).
RULE_DATA = REPO / "topology"
# The test fixtures: real dumps and snapshots with their sources, golden files, fuzz seeds.
REF = REPO / "tests" / "reference"
# What `make userspace selftests` leaves for the emulated node: gdrpeer, test_lib_driver and
# the selftest programs and tools (the node copies every executable here into the guest).
BIN = REPO / "build" / "bin"
