"""The test bed's dma-buf capable soft-RoCE: a patched rdma_rxe and rxe userspace provider.

Test-only, never part of the product. Debian's rxe implements no dma-buf memory registration in
any kernel the node boots, so no byte could travel libibverbs -> ib_uverbs -> an RDMA device ->
gdrpeer memory. Two build-time patches of Debian's own source packages fix that for the node:

- the kernel module, from the `linux-source-<series>` package whose version is exactly the one
  the booted image was built from (read from the image's headers, include/generated/package.h;
  another version is refused), with tests/emunode/rxe-dmabuf-<kernel>.patch: rxe registers a
  dma-buf MR as a *dynamic* importer, reaches the bytes through the exporter's kernel mapping
  (dma_buf_vmap, I/O memory), and on move_notify invalidates the MR for good (later work
  requests on it complete with an error and never touch the memory);
- the userspace provider (librxe-rdmav34.so), from Debian's rdma-core source (trixie's 56.1:
  bookworm's 44.0 orig tarball is not on the mirror), with rdma-core-rxe-dmabuf.patch adding
  reg_dmabuf_mr. It replaces the host's provider in the guest only; its private ABI must be the
  host libibverbs' (checked symbol by symbol).

rxe copies with the CPU: it proves the verbs path and the exporter's revocation contract, not
device DMA, which the edu stand-in proves. Builds are cached under build/cache/softroce, keyed by
source version and patch contents. 5.10 has no dma-buf MRs at all (they arrived in 5.12).
"""

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import build, kernels
from .errors import HarnessError
from .errors import run_checked as _run
from .paths import cache_dir, cache_lock

HERE = Path(__file__).resolve().parent

# Kernel name -> the rxe patch for that kernel family.
KERNEL_PATCHES = {"6.1": "rxe-dmabuf-6.1.patch", "6.12": "rxe-dmabuf-6.12.patch",
                  "7.2": "rxe-dmabuf-7.2.patch",
                  # the debug kernel is built from the very source of the stock 6.1 image
                  "6.1-debug": "rxe-dmabuf-6.1.patch"}
UNSUPPORTED = {"5.10": "ibv_reg_dmabuf_mr needs Linux 5.12 or later (no REG_DMABUF_MR uAPI, no "
                       "reg_user_mr_dmabuf in 5.10)"}

RDMA_CORE = "rdma-core"
RDMA_CORE_VERSION = "56.1-1"
RDMA_CORE_SUITE = ("trixie-src", [f"deb-src {kernels.MIRROR} trixie main"])
RDMA_CORE_PATCH = "rdma-core-rxe-dmabuf.patch"
PROVIDER_NAME = "librxe-rdmav34.so"
HOST_LIBIBVERBS = Path("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
HOST_PROVIDER = Path("/usr/lib/x86_64-linux-gnu/libibverbs") / PROVIDER_NAME
CMAKE_OPTIONS = ["-GNinja", "-DCMAKE_BUILD_TYPE=Release", "-DNO_MAN_PAGES=1", "-DNO_PYVERBS=1",
                 "-DENABLE_STATIC=0"]


def supported(kernel_name):
    """None when the node can boot the dma-buf rxe on this kernel, else why not (one line)."""
    if kernel_name in UNSUPPORTED:
        return UNSUPPORTED[kernel_name]
    if kernel_name not in KERNEL_PATCHES:
        return f"no rxe dma-buf patch for kernel {kernel_name} (tests/emunode has " \
               f"{', '.join(sorted(KERNEL_PATCHES))})"
    return None


def _digest(*paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:10]


def image_source_version(kernel):
    """The Debian version of the linux source the image was built from ("6.1.192-2")."""
    built = kernel.kdir / ".gdrpeer-source"  # a debug kernel, built here from that source
    if built.exists():
        return built.read_text().strip()
    pkg = kernel.kdir / "include" / "generated" / "package.h"
    if not pkg.exists():  # the arch headers package carries it; older layouts use -common
        pkg = next(kernel.root.glob("usr/src/linux-headers-*/include/generated/package.h"), pkg)
    m = re.search(r'LINUX_PACKAGE_ID\s+" Debian ([^"\s]+)"', pkg.read_text() if pkg.exists() else "")
    if not m:
        raise HarnessError(f"kernel {kernel.name}: cannot tell which Debian source version built "
                           f"{kernel.release} ({pkg} has no LINUX_PACKAGE_ID)")
    return m.group(1)


def _rxe_source(kernel, version, log):
    """drivers/infiniband/sw/rxe of linux-source-<series> at exactly `version` (cached)."""
    series = ".".join(kernel.release.split(".")[:2]).split("-")[0]
    pkg = f"linux-source-{series}"
    out = cache_dir() / "softroce" / "src" / f"{pkg}_{version}" / "rxe"
    if (out / "rxe_mr.c").exists():
        return out
    dl = cache_dir() / "softroce" / "downloads"
    shutil.rmtree(dl, ignore_errors=True)
    dl.mkdir(parents=True)
    tmp = dl / "x"
    tarball = kernels.unpack_linux_source(
        kernel.name, series, version, dl, tmp, log,
        f"the source of {kernel.release}, for rdma_rxe",
        f"it is the exact source of the booted kernel {kernel.release}: another version would "
        "build a module for a different kernel")
    _run(["tar", "-xf", str(tarball), "-C", str(tmp), "--wildcards", "*/drivers/infiniband/sw/rxe/*"],
         f"extracting rxe from {tarball.name}")
    src = next(tmp.glob("*/drivers/infiniband/sw/rxe"))
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    shutil.rmtree(dl)
    return out


def ensure_module(kernel_name, log=print):
    """The patched rdma_rxe.ko for kernel `kernel_name` (built once, cached)."""
    why = supported(kernel_name)
    if why:
        raise HarnessError(f"no dma-buf rxe for kernel {kernel_name}: {why}")
    kernel = kernels.ensure_kernel(kernel_name, log=log)
    version = image_source_version(kernel)
    patch = HERE / KERNEL_PATCHES[kernel_name]
    base = cache_dir() / "softroce" / f"rxe-{kernel.release}-{version}-{_digest(patch)}"
    ko = base / "rdma_rxe.ko"
    fd = cache_lock(base.parent / f".{base.name}.lock")
    try:
        if ko.exists():
            return ko
        src = _rxe_source(kernel, version, log)
        log(f"emunode: building the dma-buf rdma_rxe for {kernel.release} ({version} + {patch.name})")
        if kernel_name in build.CHROOT_TOOLCHAIN:
            root = build._chroot(kernel_name, kernel, log)
            work, kdir = root / "build" / base.name, f"/usr/src/linux-headers-{kernel.release}"
            inside = f"/build/{base.name}"
        else:
            work, kdir, inside = base / "build", str(kernel.kdir), None
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        _run(["patch", "-p1", "--no-backup-if-mismatch", "-i", str(patch)],
             f"applying {patch.name} to {kernel.release}'s rxe", cwd=work)
        make = ["make", "-C", kdir, f"M={inside or work}", f"-j{os.cpu_count() or 1}", "modules"]
        if inside:
            proc = root / "proc"
            mounted = subprocess.run(["mount", "-t", "proc", "proc", str(proc)]).returncode == 0
            try:
                _run(["chroot", str(root), *make], f"building rdma_rxe for {kernel.release}")
            finally:
                if mounted:
                    subprocess.run(["umount", str(proc)])
        else:
            _run([*make, "CC=gcc"], f"building rdma_rxe for {kernel.release}")
        vermagic = _run(["modinfo", "-F", "vermagic", str(work / "rdma_rxe.ko")], "modinfo").strip()
        if vermagic.split()[0] != kernel.release:
            raise HarnessError(f"the rdma_rxe built for {kernel.release} says vermagic "
                               f"'{vermagic}': headers and image disagree")
        # the toolchain that built it strips it (the host's binutils may not know 7.2's ELF)
        strip = ["strip", "--strip-debug", "-o"]
        if inside:
            _run(["chroot", str(root), "x86_64-linux-gnu-" + strip[0], *strip[1:],
                  f"{inside}/rdma_rxe.stripped", f"{inside}/rdma_rxe.ko"],
                 "strip rdma_rxe.ko in the chroot")
        else:
            _run([*strip, str(work / "rdma_rxe.stripped"), str(work / "rdma_rxe.ko")], "strip rdma_rxe.ko")
        base.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / "rdma_rxe.stripped", base / "rdma_rxe.ko.tmp")
        (base / "rdma_rxe.ko.tmp").rename(ko)
        shutil.rmtree(work, ignore_errors=True)
        return ko
    finally:
        os.close(fd)


def _symbols(path, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = _run(["nm", "-D", flag, "--with-symbol-versions", str(path)], f"nm {path}")
    return {line.split()[-1].replace("@@", "@") for line in out.splitlines() if line.split()}


def ensure_provider(log=print):
    """The rxe userspace provider with reg_dmabuf_mr (built once, cached)."""
    patch = HERE / RDMA_CORE_PATCH
    upstream = RDMA_CORE_VERSION.rsplit("-", 1)[0]
    base = cache_dir() / "softroce" / f"rdma-core-{RDMA_CORE_VERSION}-{_digest(patch)}"
    lib = base / PROVIDER_NAME
    fd = cache_lock(base.parent / f".{base.name}.lock")
    try:
        if not lib.exists():
            _build_provider(base, upstream, patch, log)
    finally:
        os.close(fd)
    # The provider is loaded by the host's libibverbs (copied into the guest): every private
    # symbol it needs must be there, else libibverbs would refuse it in the guest.
    missing = sorted(s for s in _symbols(lib, defined=False) if "IBVERBS" in s
                     and s not in _symbols(HOST_LIBIBVERBS, defined=True))
    if missing:
        raise HarnessError(f"{lib} (rdma-core {RDMA_CORE_VERSION}) needs symbols this host's "
                           f"{HOST_LIBIBVERBS} lacks: {', '.join(missing[:5])}")
    return lib


def _build_provider(base, upstream, patch, log):
    for tool, pkg in (("cmake", "cmake"), ("ninja", "ninja-build"), ("patch", "patch")):
        if not shutil.which(tool):
            raise HarnessError(f"{tool} not found: install Debian's {pkg} (make deps)")
    apt = kernels._Apt(suite=RDMA_CORE_SUITE[0], sources=RDMA_CORE_SUITE[1])
    apt.update()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log(f"emunode: fetching Debian's {RDMA_CORE} {RDMA_CORE_VERSION} source for the rxe provider")
    # --tar-only: the upstream tarball, checked against the suite's Sources index (the
    # provider needs none of Debian's packaging patches).
    apt._run("apt-get", "-q", "source", "--download-only", "--tar-only",
             f"{RDMA_CORE}={RDMA_CORE_VERSION}", cwd=base)
    tarball = next(base.glob(f"{RDMA_CORE}_{upstream}.orig.tar.*"))
    _run(["tar", "-xf", str(tarball), "-C", str(base)], f"unpacking {tarball.name}")
    src = base / f"{RDMA_CORE}-{upstream}"
    _run(["patch", "-p1", "--no-backup-if-mismatch", "-i", str(patch)], f"applying {patch.name}", cwd=src)
    log(f"emunode: building {PROVIDER_NAME} from {RDMA_CORE} {upstream} (once)")
    _run(["cmake", "-S", str(src), "-B", str(src / "build"), *CMAKE_OPTIONS], "configuring rdma-core")
    _run(["ninja", "-C", str(src / "build"), f"lib/{PROVIDER_NAME}"], f"building {PROVIDER_NAME}")
    shutil.copy2(src / "build" / "lib" / PROVIDER_NAME, base / (PROVIDER_NAME + ".tmp"))
    shutil.rmtree(src)
    tarball.unlink()
    (base / (PROVIDER_NAME + ".tmp")).rename(base / PROVIDER_NAME)


def guest_files(kernel_name, log=print):
    """Guest paths -> bytes that put the dma-buf rxe in place of Debian's in the node's
    initramfs: the module at the path the base archive loads rdma_rxe from, the provider at
    the host's provider path."""
    kernel = kernels.ensure_kernel(kernel_name, log=log)
    ko = ensure_module(kernel_name, log=log)
    lib = ensure_provider(log=log)
    return {f"/lib/modules/{kernel.release}/rdma_rxe.ko": ko.read_bytes(),
            str(HOST_PROVIDER): lib.read_bytes()}


# ---- what the host checks in the BAR backing file ---------------------------------------------
# gdrpeer_rxe_dmabuf (selftests/tools) prints "BAR ..." lines naming what the ivshmem backing file
# must hold once the guest is off; check_bar() verifies each one byte by byte.

NVSTUB_POISON = 0x6B  # NVSTUB_POISON_BYTE of selftests/kmod/gdrpeer_nvstub.h


def host_fill(length):
    """The bytes the host writes at the start of the BAR file before boot (Node.run bar_init):
    SHA-256 of a counter, so no guest code could produce them by chance."""
    return host_fill_range(0, length)


def host_fill_range(offset, length):
    """host_fill()'s bytes for [offset, offset + length) of the BAR (offset and length
    multiples of 32): what `emunode-host bar_fill` writes there."""
    if offset % 32 or length % 32:
        raise ValueError(f"host fill range {offset:#x}+{length:#x} is not 32-byte aligned")
    return b"".join(hashlib.sha256(b"gdrpeer host %d" % i).digest()
                    for i in range(offset // 32, (offset + length) // 32))


# The guest asks the host to write its bytes into gdrpeer memory *after* allocating it (gdrpeer
# clears what it hands out): it writes this header at the start of the range, then waits until
# the host has overwritten it with host_fill()'s bytes for those BAR offsets.
HOST_FILL_MAGIC = b"GDRPEER HOST FILL PLEASE"   # 24 bytes, then u64 BAR offset, u64 length


class HostFill:
    """Node.run(bar_host=HostFill(fill)): while the guest runs, answers every host-fill
    request found in the BAR file by writing fill[off:off + len] there (len <= 16 MiB)."""

    def __init__(self, fill):
        self.fill = fill
        self.answered = []

    def __call__(self, bar_path, stop):
        import mmap
        with open(bar_path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            while not stop.wait(0.2):
                pos = m.find(HOST_FILL_MAGIC)
                while pos >= 0:
                    off = int.from_bytes(m[pos + 24:pos + 32], "little")
                    n = int.from_bytes(m[pos + 32:pos + 40], "little")
                    if off == pos and 40 <= n and off + n <= len(self.fill):
                        m[off:off + n] = self.fill[off:off + n]
                        self.answered.append((off, n))
                    else:  # not a request of ours: never loop on it
                        m[pos] = 0
                    pos = m.find(HOST_FILL_MAGIC, pos + 1)


def pattern(length, seed):
    """pattern(seed) of gdrpeer_rxe_dmabuf.c: byte i = ((i * 2654435761 + seed) mod 2^32) >> 13."""
    return bytes((((i * 2654435761 + seed) & 0xFFFFFFFF) >> 13) & 0xFF for i in range(length))


def _first_diff(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def check_bar(output, bar_path, fill):
    """[(line, ok, what)] for every "BAR ..." line of `output`, checked against the BAR file
    `bar_path`; `fill` = the bytes written there before boot."""
    data = Path(bar_path).read_bytes()
    results = []
    for line in output.splitlines():
        f = line.split()
        if len(f) < 4 or f[0] != "BAR":
            continue
        kind, name, off = f[1], f[2], int(f[3])
        if kind == "PATTERN":
            n, seed = int(f[4]), int(f[5])
            got, want = data[off:off + n], pattern(n, seed)
            ok = got == want
            what = (f"{name}: {n} bytes at BAR offset {off:#x} are the guest's pattern" if ok else
                    f"{name}: BAR offset {off:#x} + {_first_diff(got, want)} differs from the pattern")
        elif kind == "U64":
            got = int.from_bytes(data[off:off + 8], "little")
            ok = got == int(f[4])
            what = f"{name}: u64 at BAR offset {off:#x} is {got:#x}" + ("" if ok else f", want {int(f[4]):#x}")
        elif kind == "HOST":
            n = int(f[4])
            ok = data[off:off + n] == fill[off:off + n] and off + n <= len(fill)
            what = f"{name}: {n} bytes at BAR offset {off:#x} " + (
                "still hold what the host wrote there" if ok else "changed since the host wrote them")
        elif kind == "READ":
            n, sha = int(f[4]), f[5]
            ok = off + n <= len(fill) and hashlib.sha256(fill[off:off + n]).hexdigest() == sha
            what = f"{name}: RDMA READ of {n} bytes at BAR offset {off:#x} returned " + (
                "exactly what the host wrote there before the READ" if ok else "other bytes than the host wrote")
        elif kind == "POISON":
            n = int(f[4])
            region = data[off:off + n]
            ok = region == bytes([NVSTUB_POISON]) * n
            what = f"{name}: {n} bytes at BAR offset {off:#x} " + (
                "are all the stand-in's free poison: no WRITE landed after the revoke" if ok else
                f"hold non-poison bytes at +{_first_diff(region, bytes([NVSTUB_POISON]) * n)}")
        elif kind == "SEQMAX":
            n, last = int(f[4]), int(f[5])
            bad = []
            for s in range(off, off + n, 64):
                slot = data[s:s + 64]
                words = {int.from_bytes(slot[i:i + 8], "little") for i in range(0, 64, 8)}
                # untouched (zero, or what was there at boot) or a WRITE numbered 1..last
                if slot not in (fill[s:s + 64], bytes(64)) and \
                        not (len(words) == 1 and 1 <= min(words) <= last):
                    bad.append(s)
            ok = not bad
            what = f"{name}: " + ("no 64-byte slot holds a WRITE numbered after the revoke" if ok else
                                  f"{len(bad)} slots hold bytes written after the revoke (first at {bad[0]:#x})")
        else:
            ok, what = False, f"unknown BAR line kind {kind}"
        results.append((line, ok, what))
    return results
