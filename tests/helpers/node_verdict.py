"""The node verdict re-derived from a `check --json` report, independently of the checker's code."""

VERDICTS = ["optimal", "degraded", "unreliable", "blocked"]


def node_verdict_from_pairs(j):
    """The node verdict re-derived from a `check --json` report's pairs, by the rule NCCL follows:
    each GPU is bound to its closest NIC (ncclTopoGetLocalNet picks the NICs with the best path
    from the GPU), so a GPU counts with its best NIC; GPU-GPU and GPU-NVMe pairs all count, and so
    do node findings with a severity. Returns (index into VERDICTS, {GPU label: its best NIC's})."""
    roles = {d["label"]: d["role"] for d in j["devices"]}
    best, others = {}, []
    for p in j["pairs"]:
        v = VERDICTS.index(p["verdict"])
        if (roles[p["a"]], roles[p["b"]]) == ("gpu", "nic"):
            best[p["a"]] = min(best.get(p["a"], 3), v)
        else:
            others.append(v)
    node = [VERDICTS.index(n["severity"]) for n in j["notes"] if n["severity"] != "note"]
    return max([*best.values(), *others, *node], default=0), best
