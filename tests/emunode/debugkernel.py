"""The debug guest kernel "6.1-debug": Debian's linux-source-6.1 built with KASAN, KFENCE,
lockdep, DEBUG_ATOMIC_SLEEP, DMA_API_DEBUG and DEBUG_OBJECTS, trimmed to what the node uses.

The source is the very version of the stock 6.1 guest image (read from the image's own version
string); if bookworm's index no longer carries that linux-source-6.1, the build fails and says
so rather than build a different kernel. The config is allnoconfig plus debug-kernel.config
(only what the node uses is built), and every line of that file must hold after olddefconfig.
DEBUG_PATCHES (tests/emunode/debug-kernel-*.patch) are applied to the source first: fixes the
test-only kernel needs that Debian's 6.1 lacks. Each build is kept in its own folder,
build/cache/kernels/6.1-debug/<key>/, keyed by source version + config + patches + compiler, built
once with `nice`; out-of-tree modules build against the built tree itself. A new key starts from
a copy of an earlier build of the same source version (objects and all) and rebuilds only what
the change touches; the earlier build stays as it is.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from . import kernels
from .errors import HarnessError
from .errors import run_checked as _run
from .paths import cache_dir, cache_lock

HERE = Path(__file__).resolve().parent
FRAGMENT = HERE / "debug-kernel.config"
# debug kernel name -> the stock Debian kernel whose source version it is built from
DEBUG_KERNELS = {"6.1-debug": "6.1"}
# Build-time patches of the debug kernel's source, applied in this order (each file says why).
DEBUG_PATCHES = ("debug-kernel-rcu-tasks-boot-deadlock.patch",)
BUILD_FORMAT = 3  # bump when the build steps change what ends up in the tree
APPLIED = ".gdrpeer-patches"  # in the source tree: the patches applied to it, one name a line
SEEDED_FROM = ".gdrpeer-seed"  # in a copied source tree: the tree it was copied from


def debug_kernels():
    return sorted(DEBUG_KERNELS)


def stock_version(stock):
    """Debian's package version of a stock kernel ("6.1.192-2"), from the version string that
    every bzImage carries uncompressed in its setup header ("... Debian 6.1.192-2 (...)")."""
    m = re.search(rb"#\d+ SMP[^\0]*? Debian (\d+\.\d+\.\d+-[\w.+~]+)", stock.vmlinuz.read_bytes()[:65536])
    if not m:
        raise HarnessError(f"cannot read the Debian version out of {stock.vmlinuz}")
    return m.group(1).decode()


def _gcc_version():
    return _run(["gcc", "--version"], "gcc --version").splitlines()[0]


def _key(version):
    patches = [(name, (HERE / name).read_text()) for name in DEBUG_PATCHES]
    text = repr((BUILD_FORMAT, version, FRAGMENT.read_text(), patches, _gcc_version()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def ensure_debug_kernel(name, log=print):
    """Build (once) and return the debug kernel `name` as a kernels.Kernel."""
    stock = kernels.ensure_kernel(DEBUG_KERNELS[name], log=log)
    version = stock_version(stock)
    key = _key(version)
    base = cache_dir() / "kernels" / name / key
    manifest = base / "manifest.json"
    fd = cache_lock(base / ".lock")
    try:
        info = json.loads(manifest.read_text()) if manifest.exists() else {}
        if info.get("key") != key:
            manifest.unlink(missing_ok=True)
            info = _build(name, stock, version, key, base, log)
            manifest.write_text(json.dumps(info, indent=1) + "\n")
    finally:
        os.close(fd)
    k = kernels.Kernel(name=name, release=info["release"], root=base / "root", vmlinuz=base / "vmlinuz",
                       moddir=base / "root/lib/modules" / info["release"], kdir=base / "src",
                       build_id=key)
    for p in (k.vmlinuz, k.moddir / "modules.dep", k.kdir / "Makefile", k.kdir / "Module.symvers"):
        if not p.exists():
            raise HarnessError(f"kernel {name} cache is incomplete ({p} missing): remove {base} and retry")
    return k


def _source_tarball(stock, version, dl, log):
    """linux-source-6.1 of exactly `version`, unpacked from its .deb; the tarball's path."""
    series = stock.name  # "6.1"
    pkg = f"linux-source-{series}"
    tarball = dl / f"{pkg}-{version}.tar.xz"
    if tarball.exists():
        return tarball
    dl.mkdir(parents=True, exist_ok=True)
    tmp = dl / "linux-source-unpack"
    inner = kernels.unpack_linux_source(
        series, series, version, dl, tmp, log,
        f"the version of the stock {series} guest image",
        f"it is the version of the stock {series} guest image {stock.release}; refusing to build "
        "another version: refetch the stock kernel (remove its cache folder) so both match")
    shutil.move(str(inner), tarball)
    shutil.rmtree(tmp)
    return tarball


def _check_config(config):
    """Every line of the fragment must hold in the final .config; the lines that do not."""
    have = {}
    for line in config.read_text().splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line) or re.match(r"^# (CONFIG_\w+) is not set$", line)
        if m:
            have[m.group(1)] = m.group(2) if m.lastindex == 2 else "n"
    bad = []
    for line in FRAGMENT.read_text().splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line) or re.match(r"^# (CONFIG_\w+) is not set$", line)
        if not m:
            continue
        want = m.group(2) if m.lastindex == 2 else "n"
        got = have.get(m.group(1), "n")
        if got != want:
            bad.append(f"{m.group(1)}={want} (got {got})")
    return bad


def _seed_tree(name, version, base):
    """An earlier build tree of the same source version to start from (the newest), or None.
    Earlier layouts kept the tree in kernels/<name>/src; now each key has its own folder."""
    parent = base.parent
    trees = [p for p in [parent / "src", *parent.glob("*/src")] if p.parent != base]
    trees = [t for t in trees if (t / ".gdrpeer-source").exists()
             and (t / ".gdrpeer-source").read_text() == version and (t / "vmlinux").exists()]
    return max(trees, key=lambda t: (t / "vmlinux").stat().st_mtime, default=None)


def _applied(src):
    f = src / APPLIED
    return f.read_text().split() if f.exists() else []


def _sync_patches(name, src, log):
    """Make the tree carry exactly DEBUG_PATCHES: reverse the ones it has that are no longer
    wanted (newest first), then apply the missing ones. An edited patch is reversed with the
    text it was applied with (kept next to the tree), then applied anew."""
    kept = src.parent / "applied-patches"
    have, want = _applied(src), list(DEBUG_PATCHES)
    while have and (len(have) > len(want) or have != want[:len(have)]
                    or (kept / have[-1]).read_text() != (HERE / have[-1]).read_text()):
        old = have.pop()
        log(f"emunode: {name}: reversing {old}")
        _run(["patch", "-p1", "-R", "--no-backup-if-mismatch", "-i", str(kept / old)],
             f"{name}: reversing {old}", cwd=src)
        (src / APPLIED).write_text("".join(f"{p}\n" for p in have))
    kept.mkdir(exist_ok=True)
    for p in want[len(have):]:
        log(f"emunode: {name}: applying {p}")
        _run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-i", str(HERE / p)],
             f"{name}: applying {p}", cwd=src)
        shutil.copy2(HERE / p, kept / p)
        have.append(p)
        (src / APPLIED).write_text("".join(f"{x}\n" for x in have))


def _keep_objtool_time(name, src, seed, make):
    """objtool's own build records absolute paths, so a copied tree rebuilds objtool, and every
    kernel object lists objtool as a prerequisite: Kbuild would recompile all of them (a cold
    build). It is the same program from the same source: once `make prepare` has rebuilt it,
    give objtool's build outputs the seed's objtool time back."""
    _run([*make, "prepare"], f"{name}: make prepare")
    ref = seed / "tools/objtool/objtool"
    if not ref.exists():
        return
    st = ref.stat()
    for f in (src / "tools/objtool").rglob("*"):
        if f.is_file() and not f.is_symlink() and f.stat().st_mtime_ns > st.st_mtime_ns:
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def _build(name, stock, version, key, base, log):
    started = time.monotonic()
    tarball = _source_tarball(stock, version, base.parent / "source", log)
    src, root = base / "src", base / "root"
    if root.exists():
        shutil.rmtree(root)
    marker = src / ".gdrpeer-source"
    make = ["nice", "make", "-C", str(src), f"-j{os.cpu_count() or 1}", "CC=gcc"]
    seed = None
    if not (marker.exists() and marker.read_text() == version):
        # a half-finished build of this key goes on where it stopped; otherwise start from
        # an earlier build (its objects make this one incremental) or from the tarball
        if src.exists():
            shutil.rmtree(src)
        seed = _seed_tree(name, version, base)
        base.mkdir(parents=True, exist_ok=True)
        if seed is not None:
            log(f"emunode: copying {seed} (built) into {src}: only what changed is rebuilt")
            _run(["cp", "-a", str(seed), str(src)], f"copying {seed}")
            (src / SEEDED_FROM).write_text(str(seed))
            if (seed.parent / "applied-patches").is_dir():
                shutil.copytree(seed.parent / "applied-patches", base / "applied-patches",
                                dirs_exist_ok=True)
        else:
            src.mkdir(parents=True)
            log(f"emunode: unpacking {tarball.name} into {src}")
            _run(["tar", "-xf", str(tarball), "-C", str(src), "--strip-components=1"],
                 f"unpacking {tarball.name}")
            marker.write_text(version)
    _sync_patches(name, src, log)
    mk = (src / "Makefile").read_text()
    tree = ".".join(re.search(rf"^{v} = (\d+)", mk, re.M).group(1) for v in ("VERSION", "PATCHLEVEL", "SUBLEVEL"))
    if tree != version.split("-")[0]:
        raise HarnessError(f"linux-source tree is {tree}, the stock image is {version}: not building a mismatch")

    _run([*make, "allnoconfig", f"KCONFIG_ALLCONFIG={FRAGMENT}"], f"{name}: make allnoconfig")
    _run([*make, "olddefconfig"], f"{name}: make olddefconfig")
    bad = _check_config(src / ".config")
    if bad:
        raise HarnessError(f"{name}: Kconfig dropped options of {FRAGMENT.name}: {', '.join(bad)}")
    if (src / SEEDED_FROM).exists():
        _keep_objtool_time(name, src, Path((src / SEEDED_FROM).read_text()), make)
    log(f"emunode: building {name} ({version}, config {key}) with nice; this takes a long time once")
    _run([*make, "bzImage", "modules"], f"{name}: building the kernel")
    depmod = shutil.which("depmod") or "/sbin/depmod"
    _run([*make, "modules_install", f"INSTALL_MOD_PATH={root}", f"DEPMOD={depmod}"],
         f"{name}: modules_install")
    release = _run(["make", "-s", "-C", str(src), "kernelrelease"], "make kernelrelease").strip()
    shutil.copy2(src / "arch/x86/boot/bzImage", base / "vmlinuz")
    took = round(time.monotonic() - started)
    log(f"emunode: {name} = {release} built in {took} s")
    seeded = src / SEEDED_FROM
    return {"name": name, "release": release, "key": key, "source_version": version,
            "stock_release": stock.release, "patches": list(DEBUG_PATCHES), "build_seconds": took,
            "cpus": os.cpu_count(),
            "incremental_from": seeded.read_text() if seeded.exists() else None}
