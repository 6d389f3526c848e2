"""What both mutation runners (run.py: host, driver_run.py: gdrpeer.ko) do with their list before
planting: refuse duplicated ids, take the --only subset, print the --list."""

import sys


def choose(mutants, only, who):
    """Every mutant, or those --only names (comma-separated ids). A duplicated id in the list or
    an unknown one in --only ends the run with a message that starts with WHO."""
    ids = [m.id for m in mutants]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        sys.exit(f"{who}: duplicate mutant ids {sorted(dupes)}")
    if not only:
        return list(mutants)
    want = set(only.split(","))
    if want - set(ids):
        sys.exit(f"{who}: unknown mutant ids {sorted(want - set(ids))}")
    return [m for m in mutants if m.id in want]


def print_list(mutants, width):
    for m in mutants:
        print(f"{m.id:{width}} {m.file}: {m.why}")
