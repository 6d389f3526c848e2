"""Building our kernel modules for a guest kernel, and the kselftest headers.

Kernels whose headers expect the host's compiler family (5.10, 6.1, 6.12: gcc-10/12 era) build
with the host gcc. 7.2's headers are configured for gcc-16 (its .config enables gcc-14+ only
features such as typeof_unqual, counted_by and -fmin-function-alignment), so faking it with
gcc-12 would build something subtly different from the kernel: 7.2 modules are built inside a
Debian sid chroot (debootstrap) that has the matching gcc and kbuild.
"""

import contextlib
import os
import re
import shutil
import subprocess

from . import kernels
from .errors import HarnessError
from .errors import run_checked as _run
from .paths import REPO, build_dir, cache_dir

# Kernels that need the sid chroot toolchain, with the packages installed into it.
CHROOT_TOOLCHAIN = {"7.2": ("sid", ["make", "libc6-dev", "libelf1t64", "kmod", "dwarves"])}


def modules_dir(kernel_name):
    return build_dir() / "kmod" / kernel_name


def build_modules(kernel_name, log=print):
    """Build gdrpeer.ko and the test modules for kernel `kernel_name` into build/kmod/<name>/."""
    kernel = kernels.ensure_kernel(kernel_name, log=log)
    out = modules_dir(kernel_name)
    if kernel_name not in CHROOT_TOOLCHAIN:
        _run(["make", "-C", str(REPO), "--no-print-directory", "modules", f"KDIR={kernel.kdir}",
              f"MODOUT={out}", "CC=gcc"], f"building modules for kernel {kernel_name}")
    else:
        root = _chroot(kernel_name, kernel, log)
        stage = root / "build" / "gdrpeer"
        if stage.exists():
            shutil.rmtree(stage)
        # Stage the sources with the same Makefile rule, then build inside the chroot.
        _run(["make", "-C", str(REPO), "--no-print-directory", "modules-stage", f"MODOUT={stage}"],
             "staging module sources")
        with _proc_mounted(root):
            _run(["chroot", str(root), "make", "-C", "/build/gdrpeer", "--no-print-directory",
                  "-f", "Makefile.modules", "modules-build",
                  f"KDIR=/usr/src/linux-headers-{kernel.release}", "MODOUT=/build/gdrpeer"],
                 f"building modules for kernel {kernel_name} in the sid chroot")
        out.mkdir(parents=True, exist_ok=True)
        for old in [*out.glob("*.ko"), *out.glob("*.log")]:
            old.unlink()
        # the modules, and the logs of the gdrpeer-<variant>.ko builds (tests read them)
        for f in [*stage.glob("*.ko"), *stage.glob("*.log")]:
            shutil.copy2(f, out / f.name)
    kos = sorted(p.name for p in out.glob("*.ko"))
    log(f"emunode: modules for kernel {kernel_name} ({kernel.release}): {', '.join(kos) or 'none'}")
    return out


def check_modules(kernel_name, log=print):
    """`make kernel-check`: the W=1 + sparse (C=1) build of the driver and the test modules against
    `kernel_name`'s headers, from a staged copy in build/kcheck/<name>, where any warning fails;
    then the driver again with the peer-memory client, against the test-only host's OFED-style
    headers (ofa-stage), and once more as its test-only build (GDRPEER_TEST_HOOKS=1). Kernels of CHROOT_TOOLCHAIN are checked inside their chroot (with its
    gcc and its sparse), the others with the host's."""
    kernel = kernels.ensure_kernel(kernel_name, log=log)
    if kernel_name in CHROOT_TOOLCHAIN:
        root = _chroot(kernel_name, kernel, log)
        if not (root / "usr/bin/sparse").exists():
            _run(["chroot", str(root), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get",
                  "-o", "Acquire::Check-Valid-Until=false", "install", "-y", "-q",
                  "--no-install-recommends", "sparse"], "installing sparse in the toolchain chroot")
        stage, inside = root / "build" / "kcheck", "/build/kcheck"
        kdir, prefix = f"/usr/src/linux-headers-{kernel.release}", ["chroot", str(root)]
        _install_checker_probe(root, kdir)
        cc = []  # the headers name the chroot's own compiler
    else:
        root = None
        stage = build_dir() / "kcheck" / kernel_name
        inside, kdir, prefix = str(stage), str(kernel.kdir), []
        cc = ["CC=gcc"]
    _run(["make", "-C", str(REPO), "--no-print-directory", "modules-stage", f"MODOUT={stage}"],
         "staging module sources")
    steps = [
        (["make", "-C", f"{inside}/driver", f"KDIR={kdir}", *cc, "check"], "the driver"),
        (["make", "-C", f"{inside}/selftests/kmod", f"KDIR={kdir}", *cc, "check"],
         "the test modules"),
        (["make", "-f", f"{inside}/Makefile.modules", "ofa-stage", f"MODOUT={inside}"],
         "the OFED-style headers of the test host"),
        (["make", "-C", f"{inside}/driver", f"KDIR={kdir}", *cc, f"OFA_DIR={inside}/ofa_kernel",
          "check"], "the driver with the peer-memory client"),
        (["make", "-C", f"{inside}/driver", f"KDIR={kdir}", *cc, "GDRPEER_TEST_HOOKS=1",
          "check"], "the driver's test-only build (GDRPEER_TEST_HOOKS=1, gdrpeer-testhooks.ko)"),
    ]
    with _proc_mounted(root) if root else contextlib.nullcontext():
        for cmd, what in steps:
            log(f"emunode: kernel-check {kernel_name}: {what}")
            _run([*prefix, *cmd], f"W=1 C=1 check of {what} for kernel {kernel_name}")
    log(f"emunode: kernel-check {kernel_name} ({kernel.release}): clean")


@contextlib.contextmanager
def _proc_mounted(root):
    """/proc mounted inside the chroot `root` for the block: objtool reads /proc/self/limits."""
    proc = root / "proc"
    mounted = subprocess.run(["mount", "-t", "proc", "proc", str(proc)]).returncode == 0
    try:
        yield
    finally:
        if mounted:
            subprocess.run(["umount", str(proc)])


def _install_checker_probe(root, kdir):
    """Give kbuild the scripts/checker-valid.sh that its C=1 asks and Debian's linux-kbuild leaves
    out (without it 7.x turns sparse off with only a make warning). `kdir` is the headers folder
    as the chroot sees it; Debian's flavour Makefile includes the -common tree's, which is kbuild's
    srctree."""
    top = root / kdir.lstrip("/")
    include = re.search(r"^include (\S+)/Makefile$", (top / "Makefile").read_text(), re.M)
    srctree = root / include.group(1).lstrip("/") if include else top
    if "checker-valid.sh" not in (srctree / "Makefile").read_text(errors="replace"):
        return
    probe = (srctree / "scripts").resolve() / "checker-valid.sh"
    if not probe.exists():
        shutil.copy2(REPO / "tests" / "emunode" / "checker-valid.sh", probe)


def _chroot(kernel_name, kernel, log):
    suite, pkgs = CHROOT_TOOLCHAIN[kernel_name]
    root = cache_dir() / "toolchains" / suite
    stamp = root / ".gdrpeer-ready"
    want = f"linux-headers-{kernel.release}"
    if stamp.exists() and stamp.read_text().strip() == want:
        return root
    if os.geteuid() != 0:
        raise HarnessError(f"building for kernel {kernel_name} needs a {suite} chroot: run as root")
    if not shutil.which("debootstrap"):
        raise HarnessError("debootstrap not found: install Debian's debootstrap (make deps)")
    if not (root / "usr/bin/apt-get").exists():
        log(f"emunode: creating the {suite} toolchain chroot in {root} (once, a few minutes)")
        root.parent.mkdir(parents=True, exist_ok=True)
        _run(["debootstrap", "--variant=minbase", suite, str(root), kernels.MIRROR],
             f"debootstrap {suite}")
    log(f"emunode: installing {want} and its compiler into the {suite} chroot")
    env_apt = ["env", "DEBIAN_FRONTEND=noninteractive"]
    no_expiry = ["-o", "Acquire::Check-Valid-Until=false"]
    _run(["chroot", str(root), *env_apt, "apt-get", *no_expiry, "-q", "update"], f"apt-get update in {suite} chroot")
    _run(["chroot", str(root), *env_apt, "apt-get", *no_expiry, "install", "-y", "-q", "--no-install-recommends",
          want, *pkgs], f"installing {want} in the {suite} chroot")
    stamp.write_text(want + "\n")
    return root


def kselftest_headers(log=print):
    """kselftest_harness.h and kselftest.h from Debian's linux-source-6.1 (build-time use only)."""
    out = cache_dir() / "kselftest"
    need = ["kselftest_harness.h", "kselftest.h"]
    if all((out / n).exists() for n in need):
        return out
    apt = kernels._Apt("6.1")
    apt.update()
    dl = cache_dir() / "downloads"
    for old in dl.glob("linux-source-6.1_*.deb"):
        old.unlink()
    log("emunode: fetching linux-source-6.1 for the kselftest harness headers")
    apt.download(["linux-source-6.1"], dl)
    deb = next(dl.glob("linux-source-6.1_*.deb"))
    tmp = dl / "linux-source"
    shutil.rmtree(tmp, ignore_errors=True)
    _run(["dpkg-deb", "-x", str(deb), str(tmp)], "unpacking linux-source-6.1")
    tarball = next(tmp.glob("usr/src/linux-source-6.1.tar.*"))
    _run(["tar", "-xf", str(tarball), "-C", str(tmp), "--wildcards",
          *[f"*/tools/testing/selftests/{n}" for n in need]], "extracting kselftest headers")
    out.mkdir(parents=True, exist_ok=True)
    for n in need:
        src = next(tmp.glob(f"*/tools/testing/selftests/{n}"))
        shutil.copy2(src, out / n)
    shutil.rmtree(tmp)
    deb.unlink()
    return out
