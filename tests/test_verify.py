"""`gdrpeer verify` on the emulated node (rxe on the guest kernel, gdrpeer over the ivshmem BAR).

One boot runs every command below, in order; the tests read its results. What is asserted:
host memory passes RDMA WRITE / READ / SEND with every byte checked; gdrpeer memory through
dma-buf is reported unsupported on rxe with the reason; ibv_reg_mr on a gdrpeer mmap is reported
with its real errno and the explanation; the exit code is the worst result; bad input gets a
clear message and a non-zero exit; nothing stays allocated in the driver afterwards.
"""

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# libgdrpeer's driver-backed unit tests run in the guest too; the guest gets build/bin/.
LIB_DRIVER_TEST = REPO / "build" / "userspace" / "tests" / "test_lib_driver"

SIZE = "256K"
COUNTERS = ("cd /sys/class/gdrpeer/gdrpeer/devices/0 && "
            "for f in allocations alloc_bytes exports attachments active_maps; do echo $f $(cat $f); done")
BENCH = "gdrpeer verify --source host --method reg_mr --size 64K --bench --bench-sizes 4K,64K --bench-seconds 3 --json"

COMMANDS = {
    "before": f"gdrpeer verify --json --size {SIZE} --seed 11 > /out/before.json",
    "insmod": "insmod /gdrpeer/modules/gdrpeer.ko pcibar=$GDRPEER_GPU_BDF",
    "all": f"gdrpeer verify --json --size {SIZE} --seed 11 > /out/all.json",
    "counters_after_all": COUNTERS,
    "lib_driver": "test_lib_driver --gtest_brief=1",
    "counters_after_lib_driver": COUNTERS,
    "host_only": "gdrpeer verify --json --source host --method reg_mr --size 1M --seed 12 > /out/host.json",
    "table": "gdrpeer verify --size 64K --seed 13",
    # perftest's -x: the port uses the GID index given (issue 25), or none where it has no GID there.
    "gid_index_0": "gdrpeer verify --json --source host --method reg_mr --size 64K -x 0 > /out/gidx0.json",
    "gid_index_absent": "gdrpeer verify --json --source host --method reg_mr --size 64K -x 200 > /out/gidx200.json",
    "unknown_device": "gdrpeer verify -d mlx5_0",
    "unknown_port": "gdrpeer verify -d rxe0:2",
    "size_zero": "gdrpeer verify --size 0",
    "size_garbage": "gdrpeer verify --size 12Q",
    "size_beyond_memory": "gdrpeer verify --size 1G",
    "missing_libcuda": "gdrpeer verify --source cuda --json > /out/cuda.json",
    "bad_gdrpeer_index": "gdrpeer verify --source gdrpeer --method reg_mr --gdrpeer-device 5 --size 64K",
    "beyond_bar": "gdrpeer verify --source gdrpeer --method dmabuf --size $((GDRPEER_BAR_MIB * 2))M "
                  "--json > /out/beyond_bar.json",
    "counters_after_errors": COUNTERS,
    "bench": BENCH.replace("--bench-seconds 3", "--bench-seconds 0.05") + " > /out/bench.json",
    # The RDMA link goes away in the middle of a run (rxe itself cannot be removed while a
    # process uses it: its removal waits for the process to close the device). The link goes
    # down when verify says (on stderr) that its first bandwidth measurement (3 s long) started:
    # mid-run by construction, on a loaded host too, where any fixed delay is a guess.
    "link_down": f"({BENCH} > /out/down.json 2> /root/down.err; echo $? > /out/down.status) & "
                 "for i in $(seq 1200); do grep -q ': bench .* RDMA WRITE bandwidth' /root/down.err "
                 "2>/dev/null && break; sleep 0.1; done; ip link set eth0 down; wait; cat /root/down.err",
}
NAMES = list(COMMANDS)


@pytest.fixture(scope="module")
def run(node_factory, gdrpeer_ko):
    if not LIB_DRIVER_TEST.exists():
        pytest.fail(f"{LIB_DRIVER_TEST} is missing: run 'make userspace'")
    bindir = REPO / "build" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(LIB_DRIVER_TEST, bindir / LIB_DRIVER_TEST.name)
    res = node_factory("switch", "translated").run(list(COMMANDS.values()), timeout=600)
    return res, {name: res.results[i] for i, name in enumerate(NAMES)}


def _json(res, name):
    assert name in res.files, f"the guest wrote no /out/{name}"
    return json.loads(res.files[name])


def _rows(report):
    return {(r["source"], r["method"]): r for r in report["results"]}


def test_kernel_log_is_clean(run):
    res, _ = run
    assert res.problems() == []


def test_rxe_port_and_link_local_gid_are_found(run):
    res, out = run
    rep = _json(res, "all.json")
    (dev,) = rep["rdma"]["devices"]
    assert dev["name"] == "rxe0" and dev["software"] is True
    (port,) = dev["ports"]
    assert port["state"] == "ACTIVE" and port["link_layer"] == "Ethernet"
    chosen = next(g for g in port["gids"] if g["index"] == port["selected_gid"])
    # The guest's eth0 has no IP address: the link-local IPv6 GID is all there is.
    assert chosen["link_local"] is True and chosen["gid"].startswith("fe80:")
    assert chosen["type"] == "RoCE v2"


def test_host_memory_passes_every_transfer(run):
    res, out = run
    assert out["host_only"].status == 0, out["host_only"].output
    rep = _json(res, "host.json")
    (row,) = rep["results"]
    assert row["result"] == "pass", row
    assert [t["op"] for t in row["transfers"]] == ["RDMA WRITE", "RDMA READ", "SEND"]
    for t in row["transfers"]:
        assert t["ok"] is True and t["bytes"] == 1 << 20
        assert t["detail"] == "all 1048576 bytes match"
    assert rep["exit_code"] == 0


def test_gdrpeer_source_is_absent_before_the_module_is_loaded(run):
    res, out = run
    rep = _json(res, "before.json")
    gdr = next(s for s in rep["sources"] if s["name"] == "gdrpeer")
    assert gdr["state"] == "absent"
    assert "open /dev/gdrpeer: ENOENT" in gdr["reason"]
    assert {r["source"] for r in rep["results"]} == {"host"}
    assert out["before"].status == 1  # host dma-buf is unsupported here (no udmabuf); 1 since issue 25


def test_gdrpeer_memory_is_allocated_and_exported(run):
    res, _ = run
    rep = _json(res, "all.json")
    gdr = next(s for s in rep["sources"] if s["name"] == "gdrpeer")
    assert gdr["state"] == "ready", gdr
    assert gdr["dmabuf"] is True
    assert gdr["facts"]["dma-buf"].endswith("exporter gdrpeer")


def test_dmabuf_on_rxe_is_unsupported_with_reason(run):
    res, _ = run
    row = _rows(_json(res, "all.json"))[("gdrpeer", "ibv_reg_dmabuf_mr")]
    assert row["result"] == "unsupported"
    assert row["reason"].startswith("rxe0 cannot import dma-buf memory: software RDMA device")
    assert "EOPNOTSUPP" in row["reason"]


def test_reg_mr_on_gdrpeer_mmap_reports_errno_and_explanation(run):
    res, _ = run
    row = _rows(_json(res, "all.json"))[("gdrpeer", "ibv_reg_mr")]
    assert row["result"] == "unsupported"
    assert row["reason"].startswith("ibv_reg_mr on gdrpeer device memory failed with EFAULT")
    assert "no peer-memory client is loaded" in row["reason"]
    assert "use the dma-buf path" in row["reason"]


def test_exit_code_is_the_worst_result(run):
    res, out = run
    rep = _json(res, "all.json")
    results = {r["result"] for r in rep["results"]}
    assert results == {"pass", "unsupported"}
    # 1: nothing failed, some combination unsupported (issue 25: check's "degraded"; 2 before).
    assert rep["exit_code"] == 1 and out["all"].status == 1
    assert rep["summary"]["fail"] == 0 and rep["summary"]["pass"] >= 1


def test_human_table(run):
    _, out = run
    t = out["table"]
    assert t.status == 1  # unsupported rows, none failed: 1 since issue 25 (2 before)
    assert "rxe0 (rdma_rxe, software RDMA)" in t.output
    assert "rxe0 cannot import dma-buf memory: software RDMA device" in t.output
    assert "ibv_reg_mr on gdrpeer device memory failed with EFAULT" in t.output
    assert "(exit 1)" in t.output


@pytest.mark.parametrize("name,message", [
    ("unknown_device", "gdrpeer verify: unknown RDMA device 'mlx5_0': this node has rxe0"),
    ("unknown_port", "gdrpeer verify: rxe0 has no port 2 (it has 1)"),
    ("size_zero", "gdrpeer verify: --size: must be greater than 0"),
    ("size_garbage", "gdrpeer verify: --size: '12Q' has an unknown unit 'Q'"),
    ("size_beyond_memory", "is beyond this node's memory"),
])
def test_bad_input_is_a_usage_error(run, name, message):
    _, out = run
    assert out[name].status == 64, out[name].output
    assert message in out[name].output


def test_missing_libcuda_is_reported(run):
    res, out = run
    rep = _json(res, "cuda.json")
    (src,) = rep["sources"]
    assert src["state"] == "absent" and "cannot load libcuda.so.1" in src["reason"]
    assert {r["result"] for r in rep["results"]} == {"unsupported"}
    assert all("cannot load libcuda.so.1" in r["reason"] for r in rep["results"])
    assert out["missing_libcuda"].status == 1  # only unsupported rows: 1 since issue 25 (2 before)


def test_bad_gdrpeer_device_index_fails(run):
    _, out = run
    assert out["bad_gdrpeer_index"].status == 2  # a failed combination: 2 since issue 25 (1 before)
    assert "no gdrpeer device 5 (there are 1)" in out["bad_gdrpeer_index"].output


def test_size_beyond_the_bar_fails_with_errno(run):
    res, out = run
    rep = _json(res, "beyond_bar.json")
    (row,) = rep["results"]
    assert row["result"] == "fail"
    assert row["reason"].startswith("gdrpeer memory could not be prepared: alloc "), row["reason"]
    assert "E2BIG" in row["reason"] and "BAR is only 64 MiB" in row["reason"], row["reason"]
    assert out["beyond_bar"].status == 2  # failed: 2 since issue 25


def test_nothing_stays_allocated(run):
    _, out = run
    for name in ("counters_after_all", "counters_after_lib_driver", "counters_after_errors"):
        counters = dict(line.split() for line in out[name].output.split("\n") if line.strip())
        assert counters == {"allocations": "0", "alloc_bytes": "0", "exports": "0",
                            "attachments": "0", "active_maps": "0"}, (name, counters)


def test_libgdrpeer_against_the_driver(run):
    _, out = run
    r = out["lib_driver"]
    assert r.status == 0, r.output
    assert "[  PASSED  ] 8 tests." in r.output
    assert "SKIPPED" not in r.output


def test_bench_reports_numbers_and_plain_progress(run):
    res, out = run
    assert out["bench"].status == 0, out["bench"].output
    (row,) = _json(res, "bench.json")["results"]
    assert [b["size"] for b in row["bench"]] == [4096, 65536]
    for b in row["bench"]:
        # The latency loop runs for half the 0.05 s budget (or 100000 writes, at least 3): the
        # mean latency times the writes is that time, not just any positive number.
        n = b["latency_iterations"]
        assert n >= 3
        assert n == 100000 or 0.9 * 25000 <= b["write_latency_us"] * n < 10e6, b
        # Bandwidth: bytes moved over time, nonzero and below what any memory bus can carry.
        assert 0 < b["write_gbps"] < 1000 and 0 < b["read_gbps"] < 1000, b
    # Not a terminal: progress comes as plain lines on stderr, no carriage returns.
    assert "gdrpeer verify: host x rxe0:1 x ibv_reg_mr: bench 4 KiB" in out["bench"].output
    assert "\r" not in out["bench"].output


def test_link_going_down_mid_run_fails_clearly(run):
    res, out = run
    # The link went down only once the bandwidth measurement had started (the data checks were done).
    assert "RDMA WRITE bandwidth" in out["link_down"].output, out["link_down"].output
    assert res.files["down.status"].strip() == b"2"  # failed: 2 since issue 25
    (row,) = _json(res, "down.json")["results"]
    assert row["result"] == "fail"
    assert all(t["ok"] for t in row["transfers"])  # the checks ran before the link went
    assert "the benchmark failed" in row["reason"]
    assert "rxe0 port 1 is now DOWN (the link went away during the run)" in row["reason"], row["reason"]


def test_gid_index_option_uses_that_gid(run):
    """verify -x IDX (perftest's GID index): the port's selected GID is IDX and the loopback
    passes through it; an index the port's table does not fill leaves the port without a GID,
    the row unsupported with the reason (exit 1). Before: -x was an unknown option (exit 64)."""
    res, out = run
    assert out["gid_index_0"].status == 0, out["gid_index_0"].output
    rep = _json(res, "gidx0.json")
    (port,) = rep["rdma"]["devices"][0]["ports"]
    assert port["selected_gid"] == 0, port
    assert any(g["index"] == 0 for g in port["gids"]), port["gids"]
    (row,) = rep["results"]
    assert row["result"] == "pass", row
    assert out["gid_index_absent"].status == 1, out["gid_index_absent"].output
    rep = _json(res, "gidx200.json")
    (port,) = rep["rdma"]["devices"][0]["ports"]
    assert "selected_gid" not in port and "no GID at index 200" in port["gid_problem"], port
    (row,) = rep["results"]
    assert row["result"] == "unsupported" and "no GID at index 200" in row["reason"], row
