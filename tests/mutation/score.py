"""The generated mutants' score per file, from the lists kept in the tree (no test runs).

For each file of generate.SOURCES: planted (generate.py's catalogue), equivalent
(equivalent/<source>.txt), survived and not reached (survivors/<source>.txt). A survivor list
whose header holds the line `# every mutant judged: <date> (<how>)` says that every mutant of
the file was run at least once (run_generated.py --update-survivors writes it after a run that
judged the whole file). judged/<source>.txt lists every id some run judged: a planted id in none
of the three lists is "not judged" (code changed since the file's last run) and counts as not
killed. Only for a file with both is `killed = planted - equivalent - survived - not reached -
not judged`, since a killed mutant is never listed. Other files are shown as "not judged whole"
with what their lists hold. Listed ids that no longer exist are errors (the lists follow the code).

Usage: python3 tests/mutation/score.py [--markdown]
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
from run_generated import read_ids  # noqa: E402

JUDGED_MARK = "# every mutant judged:"


def read_list(path: Path):
    """(rows id -> first field, judged header or None) of an equivalent/ or survivors/ file."""
    rows, judged = {}, None
    if not path.exists():
        return rows, judged
    for line in path.read_text().splitlines():
        if line.startswith(JUDGED_MARK):
            judged = line[len(JUDGED_MARK):].strip()
        if not line.strip() or line.startswith("#"):
            continue
        a, _, b = line.partition("\t")
        if path.parent.name == "equivalent":
            rows[a.strip()] = b.strip()
        else:
            rows[b.strip()] = a.strip()
    return rows, judged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    files = generate.source_files()
    per_file = [(rel, *generate.sites_of(generate.REPO, rel)) for rel in files]
    allm = generate.number_sites(per_file)
    ids = {}
    for m in allm:
        ids.setdefault(Path(m.file).name, set()).add(m.id)
    errors = 0
    rows = []
    for rel in files:
        name = Path(rel).name
        planted = len(ids.get(name, ()))
        eq, _ = read_list(HERE / "equivalent" / f"{name}.txt")
        sv, judged = read_list(HERE / "survivors" / f"{name}.txt")
        for listed in (eq, sv):
            for mid in listed:
                if mid not in ids.get(name, ()):
                    print(f"score: {name}: listed id no longer planted: {mid}", file=sys.stderr)
                    errors += 1
        both = set(eq) & set(sv)
        for mid in both:
            print(f"score: {name}: both equivalent and survivor: {mid}", file=sys.stderr)
            errors += 1
        survived = sum(1 for v in sv.values() if v == "survived")
        unreached = sum(1 for v in sv.values() if v == "not reached")
        # Ids no run has judged (judged/<file>.txt): new code since the file's last run. They
        # count as not killed, so the score never rises on mutants nobody ran.
        ran = read_ids(HERE / "judged" / f"{name}.txt")
        for mid in sorted(ran - ids.get(name, set())):
            print(f"score: {name}: judged id no longer planted: {mid}", file=sys.stderr)
            errors += 1
        unjudged = len(ids.get(name, set()) - ran - set(eq) - set(sv))
        if judged and ran:
            killed = planted - len(eq) - survived - unreached - unjudged
            # Rounded down: "100 %" only where nothing is left.
            score = f"{100 * killed // (planted - len(eq))} %" if planted > len(eq) else "-"
            rows.append((name, planted, str(killed), len(eq), survived, unreached, unjudged, score, judged))
        else:
            rows.append((name, planted, "-", len(eq), survived, unreached, "-", "-", "not judged whole"))
    head = ("file", "planted", "killed", "equivalent", "survived", "not reached", "not judged", "score", "judged")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("| " + " | ".join("---" for _ in head) + " |")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        for r in (head, *rows):
            print("  ".join(str(x) for x in r))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
