"""Debian kernels for the emulated node: fetched with apt into a cache folder, never installed.

Each kernel name maps to a Debian suite. apt runs with a private source list, list folder and
archive folder under build/cache/apt/<suite>, so the host's own apt state is not touched; the
packages are unpacked with `dpkg -x` into build/cache/kernels/<name>/root.
"""

import dataclasses
import json
import lzma
import os
import re
import shutil
import subprocess
from pathlib import Path

from .errors import HarnessError, run_checked
from .paths import cache_dir, cache_lock

MIRROR = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"

# name -> (suite folder, apt source lines). The suite that carries the kernel is the one whose
# `linux-image-amd64` meta package points at it; security suites come along for the newest ABI.
SUITES = {
    "5.10": ("bullseye", [f"deb {MIRROR} bullseye main", f"deb {SECURITY} bullseye-security main"]),
    "6.1": ("bookworm", [f"deb {MIRROR} bookworm main", f"deb {MIRROR} bookworm-updates main",
                         f"deb {SECURITY} bookworm-security main"]),
    "6.12": ("bookworm-backports", [f"deb {MIRROR} bookworm-backports main"]),
    "7.2": ("sid", [f"deb {MIRROR} sid main"]),
}
DEFAULT_KERNEL = "6.1"

# Only these packages are taken from a kernel's dependency closure (not initramfs-tools etc).
KERNEL_PACKAGE = re.compile(r"^linux-(image|binary|modules|headers|kbuild)-")


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str          # "6.1"
    release: str       # "6.1.0-56-amd64" (uname -r in the guest)
    root: Path         # unpacked packages
    vmlinuz: Path
    moddir: Path       # <root>/lib/modules/<release> (holds modules.dep)
    kdir: Path         # headers tree to build out-of-tree modules against
    build_id: str = "" # what a locally built kernel was built from (debugkernel's cache key)

    @property
    def config(self):
        for cand in (self.kdir / ".config", self.moddir / "config",
                     self.root / "boot" / f"config-{self.release}"):
            if cand.exists():
                return cand
        return None


def known_kernels():
    return sorted(SUITES, key=lambda n: tuple(int(p) for p in n.split(".")))


class _Apt:
    """apt-get/apt-cache confined to a private state folder for one suite."""

    def __init__(self, name=None, suite=None, sources=None):
        """A kernel's suite by kernel name, or any `suite` folder with its apt `sources` lines
        (emunode.qemu fetches QEMU's source this way)."""
        if suite is None:
            if name not in SUITES:
                raise HarnessError(f"unknown kernel '{name}': choose one of {', '.join(known_kernels())}")
            suite, sources = SUITES[name]
        self.suite = suite
        self.dir = cache_dir() / "apt" / self.suite
        (self.dir / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (self.dir / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        self.sources = self.dir / "sources.list"
        text = "\n".join(sources) + "\n"
        if not self.sources.exists() or self.sources.read_text() != text:
            self.sources.write_text(text)
            for f in self._indexes():
                f.unlink()

    def _indexes(self):
        lists = self.dir / "lists"
        return [*lists.glob("*_Packages*"), *lists.glob("*_Sources*")]

    def _opts(self):
        d = self.dir
        return ["-o", f"Dir::Etc::SourceList={self.sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={d / 'lists'}", "-o", "Dir::State::Status=/dev/null",
                "-o", f"Dir::Cache={d}", "-o", f"Dir::Cache::Archives={d / 'archives'}",
                "-o", "APT::Architecture=amd64", "-o", "Debug::NoLocking=1",
                "-o", "Acquire::Retries=3", "-o", "Acquire::Check-Valid-Until=false"]

    def _run(self, tool, *args, cwd=None, error=HarnessError):
        if not shutil.which(tool):
            raise HarnessError(f"{tool} not found: this harness needs Debian's apt tools")
        p = subprocess.run([tool, *self._opts(), *args], capture_output=True, text=True, cwd=cwd)
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise error(f"{tool} {' '.join(args[:2])} for suite {self.suite} failed: {msg}")
        return p.stdout

    def update(self, error=HarnessError):
        if not self._indexes():
            self._run("apt-get", "-q", "update", error=error)

    def source(self, pkg, version, dest, error=HarnessError):
        """Download (not unpack) the Debian source package `pkg` (=version if given) into dest."""
        self._run("apt-get", "-q", "source", "--download-only",
                  f"{pkg}={version}" if version else pkg, cwd=dest, error=error)

    def depends(self, pkg):
        out = self._run("apt-cache", "depends", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", pkg)
        return re.findall(r"^\s*\|?(?:Pre)?Depends:\s*(\S+)", out, re.M)

    def download(self, pkgs, dest):
        dest.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(["apt-get", *self._opts(), "-q", "download", *pkgs],
                           cwd=dest, capture_output=True, text=True)
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise HarnessError(f"downloading {' '.join(pkgs)} from {self.suite} failed: {msg}")


def unpack_linux_source(kernel_name, series, version, dl, tmp, log, why, refusal):
    """linux-source-<series> of exactly `version` (no other: it must match a guest image) from
    kernel `kernel_name`'s suite, its .deb fetched into `dl` and unpacked into `tmp`; the path of
    the source tarball it holds. `why` says in the log what it is for; `refusal`, in the error,
    why another version will not do."""
    pkg = f"linux-source-{series}"
    apt = _Apt(kernel_name)
    apt.update()
    for old in dl.glob(f"{pkg}_*.deb"):
        old.unlink()
    log(f"emunode: fetching {pkg}={version} ({why})")
    try:
        apt.download([f"{pkg}={version}"], dl)
    except HarnessError as e:
        raise HarnessError(f"{pkg} {version} cannot be fetched from {apt.suite} ({e}); "
                           f"{refusal}") from e
    deb = next(dl.glob(f"{pkg}_*.deb"))
    shutil.rmtree(tmp, ignore_errors=True)
    run_checked(["dpkg-deb", "-x", str(deb), str(tmp)], f"unpacking {deb.name}")
    deb.unlink()
    return next(tmp.glob(f"usr/src/{pkg}.tar.*"))


def _closure(apt, roots):
    """The kernel packages reachable from `roots` (image, modules, headers, kbuild)."""
    seen, todo = set(), list(roots)
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        todo.extend(d for d in apt.depends(pkg) if KERNEL_PACKAGE.match(d) and d not in seen)
    return sorted(seen)


def is_known(name):
    from .debugkernel import DEBUG_KERNELS
    return name in SUITES or name in DEBUG_KERNELS


def ensure_kernel(name=DEFAULT_KERNEL, log=print):
    """Fetch and unpack kernel `name` once; later calls read the cached manifest. A debug
    kernel name ("6.1-debug") builds that kernel once (emunode.debugkernel)."""
    from .debugkernel import DEBUG_KERNELS, ensure_debug_kernel
    if name in DEBUG_KERNELS:
        return ensure_debug_kernel(name, log=log)
    if name not in SUITES:
        raise HarnessError(f"unknown kernel '{name}': choose one of {', '.join(known_kernels())}")
    base = cache_dir() / "kernels" / name
    manifest = base / "manifest.json"
    fd = cache_lock(base / ".lock")
    try:
        if not manifest.exists():
            _fetch(name, base, log)
        info = json.loads(manifest.read_text())
    finally:
        os.close(fd)
    k = Kernel(name=name, release=info["release"], root=base / "root",
               vmlinuz=base / info["vmlinuz"], moddir=base / info["moddir"], kdir=base / info["kdir"])
    for p in (k.vmlinuz, k.moddir / "modules.dep", k.kdir / "Makefile"):
        if not p.exists():
            raise HarnessError(f"kernel {name} cache is incomplete ({p} missing): remove {base} and retry")
    return k


def _fetch(name, base, log):
    apt = _Apt(name)
    log(f"emunode: fetching Debian kernel {name} ({apt.suite}) into {base}")
    apt.update()

    def pick(meta, prefix):
        for d in apt.depends(meta):
            if d.startswith(prefix) and d.endswith("-amd64"):
                return d
        raise HarnessError(f"suite {apt.suite} has no {prefix}*-amd64 behind {meta}")

    image = pick("linux-image-amd64", "linux-image-")
    headers = pick("linux-headers-amd64", "linux-headers-")
    release = image[len("linux-image-"):]
    pkgs = _closure(apt, [image, headers])
    debs = base / "debs"
    if debs.exists():
        shutil.rmtree(debs)
    apt.download(pkgs, debs)
    root = base / "root"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    shutil.rmtree(debs)  # the unpacked tree is what we keep; the .debs are 100+ MB

    # Debian generates modules.dep at install time (depmod in postinst): do the same here.
    if not (root / "lib").exists() and (root / "usr/lib/modules").exists():
        (root / "lib").symlink_to("usr/lib")  # usr-merged packages (sid)
    if (root / "lib/modules" / release).exists():
        _depmod(root, release)
    vmlinuz = next((p for p in (root / "boot" / f"vmlinuz-{release}",
                                root / "usr/lib/modules" / release / "vmlinuz",
                                root / "lib/modules" / release / "vmlinuz") if p.exists()), None)
    moddir = next((p for p in (root / "lib/modules" / release, root / "usr/lib/modules" / release)
                   if (p / "modules.dep").exists()), None)
    kdir = root / "usr/src" / f"linux-headers-{release}"
    if vmlinuz is None or moddir is None or not kdir.exists():
        raise HarnessError(f"kernel {name}: packages {', '.join(pkgs)} lack vmlinuz, modules.dep or headers")
    _make_kbuild_runnable(kdir, root, log)
    info = {"name": name, "release": release, "packages": pkgs,
            "vmlinuz": str(vmlinuz.relative_to(base)), "moddir": str(moddir.relative_to(base)),
            "kdir": str(kdir.relative_to(base))}
    (base / "manifest.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"emunode: kernel {name} = {release} ready")


def _depmod(root, release):
    depmod = shutil.which("depmod") or "/sbin/depmod"
    if not os.path.exists(depmod):
        raise HarnessError("depmod not found: install Debian's kmod package (make deps)")
    p = subprocess.run([depmod, "-b", str(root), release], capture_output=True, text=True)
    if p.returncode != 0:
        raise HarnessError(f"depmod for {release} failed: {p.stderr.strip()[-200:]}")


def _make_kbuild_runnable(kdir, root, log):
    """Point the headers' Makefile at the unpacked tree instead of the absolute /usr/src paths
    that Debian writes there (they assume the package is installed)."""
    mk = kdir / "Makefile"
    text = mk.read_text()
    fixed = re.sub(r"(?<![\w/])/usr/src/", f"{root}/usr/src/", text)
    if fixed != text:
        mk.write_text(fixed)


def module_file(kernel, relpath):
    """Path of a module from modules.dep, decompressed into the cache when needed."""
    src = kernel.moddir / relpath
    if src.suffix not in (".xz", ".zst", ".gz"):
        return src
    out = cache_dir() / "kernels" / kernel.name / "ko" / Path(relpath).with_suffix("")
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        if src.suffix == ".xz":
            tmp.write_bytes(lzma.decompress(src.read_bytes()))
        elif src.suffix == ".zst":
            subprocess.run(["zstd", "-q", "-d", "-f", str(src), "-o", str(tmp)], check=True)
        else:
            import gzip
            tmp.write_bytes(gzip.decompress(src.read_bytes()))
        tmp.rename(out)
    return out


def module_load_order(kernel, wanted):
    """Module files (in load order) for the module names `wanted`, dependencies first.

    Modules built into the kernel are skipped; an unknown module is an error."""
    deps, byname = {}, {}
    for line in (kernel.moddir / "modules.dep").read_text().splitlines():
        if ":" not in line:
            continue
        mod, rest = line.split(":", 1)
        deps[mod] = rest.split()
        byname[_modname(mod)] = mod
    builtin = set()
    bfile = kernel.moddir / "modules.builtin"
    if bfile.exists():
        builtin = {_modname(l) for l in bfile.read_text().split()}
    order = []

    def visit(mod):
        if mod in order:
            return
        for d in reversed(deps.get(mod, [])):
            visit(d)
        order.append(mod)

    for name in wanted:
        key = name.replace("-", "_")
        if key in byname:
            visit(byname[key])
        elif key not in builtin:
            raise HarnessError(f"kernel {kernel.name} ({kernel.release}) has no module '{name}'")
    return order


def _modname(path):
    n = Path(path).name
    for suf in (".xz", ".zst", ".gz"):
        if n.endswith(suf):
            n = n[: -len(suf)]
    return n[:-3].replace("-", "_") if n.endswith(".ko") else n.replace("-", "_")
