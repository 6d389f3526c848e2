"""The QEMU that boots the emulated node.

Every test runs the host's Debian QEMU (`qemu-system-x86_64`, 7.2 on bookworm) unless it asks
for another. One other build exists, "acs": the same Debian QEMU source with one patch
(qemu-xio3130-acs.patch) that gives the switch downstream port (`xio3130-downstream`) the PCIe
ACS capability. No upstream QEMU release has that (checked up to 11.1; only root ports carry
ACS), and the checker's "ACS redirect on a switch port" rule needs a switch port whose ACS
control the guest can set with setpci. The capability comes from QEMU's own pcie_acs_init(),
the code its root ports use, so the guest sees what a real switch port with ACS shows.

The build is cached under build/cache/qemu/<name>/: source fetched with apt-get source through a
private apt state (the host's apt setup is untouched), unpacked with dpkg-source, patched,
configured for x86_64-softmmu only, built with ninja; only the binary is kept.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from .errors import HarnessError
from .errors import run_checked as _run
from .kernels import MIRROR, SECURITY, _Apt
from .paths import cache_dir, cache_lock

SYSTEM_BINARY = "qemu-system-x86_64"
HERE = Path(__file__).resolve().parent

# name -> (patch file, Debian source suite and apt lines, configure options beyond the common
# ones). The source suite is the host's own release, so the build differs from the system
# QEMU only by the patch.
BUILDS = {
    "acs": ("qemu-xio3130-acs.patch",
            ("bookworm-src", [f"deb-src {MIRROR} bookworm main",
                              f"deb-src {MIRROR} bookworm-updates main",
                              f"deb-src {SECURITY} bookworm-security main"])),
}
# Where Debian's QEMU finds firmware (seabios), option ROMs (ipxe) and linuxboot: the host's
# qemu-system-data, seabios and ipxe-qemu, of the same release as the source we build.
FIRMWARE_DIRS = ("/usr/share/qemu", "/usr/share/seabios", "/usr/lib/ipxe/qemu")
# Only the system emulator for x86_64 with TCG; no tools, docs or optional libraries.
CONFIGURE = ["--prefix=/usr", "--target-list=x86_64-softmmu", "--without-default-features",
             "--enable-tcg", "--disable-docs", "--disable-tools", "--disable-user",
             "--disable-werror", "--firmwarepath=" + ":".join(FIRMWARE_DIRS)]
# Host tools the build needs; each is in `make deps`.
BUILD_TOOLS = {"meson": "meson", "ninja": "ninja-build", "dpkg-source": "dpkg-dev",
               "patch": "patch", "cc": "build-essential", "pkg-config": "pkg-config"}


class FetchError(HarnessError):
    """The QEMU source could not be downloaded (no network, mirror trouble). Tests that need
    the build skip on this one error only; every other failure fails them."""


@dataclasses.dataclass(frozen=True)
class Qemu:
    """A QEMU to boot the node with: the binary, and optionally its data directory (-L, where
    firmware and option ROMs of the same release live; a path or a sequence of paths, searched
    in order)."""
    binary: str
    datadir: object = None
    name: str = "system"
    version: str = ""

    def datadirs(self):
        if self.datadir is None:
            return []
        return [self.datadir] if isinstance(self.datadir, (str, Path)) else list(self.datadir)

    def argv(self):
        if os.sep in self.binary:
            if not os.access(self.binary, os.X_OK):
                raise HarnessError(f"QEMU binary {self.binary} is missing or not executable")
        elif shutil.which(self.binary) is None:
            raise HarnessError(f"{self.binary} not found: install Debian's qemu-system-x86 (make deps)")
        args = [self.binary]
        for d in self.datadirs():
            if not Path(d).is_dir():
                raise HarnessError(f"QEMU data directory {d} does not exist")
            args += ["-L", str(d)]
        return args

    def describe(self):
        return self.name + (f" ({self.version})" if self.version else "")


SYSTEM = Qemu(SYSTEM_BINARY)


def known_qemus():
    return ["system", *BUILDS]


def resolve(qemu, log=print):
    """A Qemu from what Node(qemu=...) was given: None or "system", a build name, or a Qemu."""
    if qemu is None or qemu == "system":
        return SYSTEM
    if isinstance(qemu, Qemu):
        return qemu
    if isinstance(qemu, str):
        return ensure_qemu(qemu, log=log)
    raise HarnessError(f"qemu must be a name ({', '.join(known_qemus())}) or a Qemu, not {qemu!r}")


def _patch_digest(patch):
    return hashlib.sha256(patch.read_bytes()).hexdigest()


def ensure_qemu(name, log=print):
    """Build QEMU `name` once (cached; rebuilt when its patch or the host's QEMU changes)."""
    if name not in BUILDS:
        raise HarnessError(f"unknown QEMU '{name}': choose one of {', '.join(known_qemus())}")
    patch = HERE / BUILDS[name][0]
    base = cache_dir() / "qemu" / name
    manifest = base / "manifest.json"
    fd = cache_lock(base / ".lock")
    try:
        info = json.loads(manifest.read_text()) if manifest.exists() else {}
        if (info.get("patch_sha256") != _patch_digest(patch)
                or info.get("host_source") != _system_source_version()
                or not (base / info["binary"]).exists()):
            info = _build(name, base, patch, log)
    finally:
        os.close(fd)
    # A QEMU built elsewhere than its prefix looks for its data next to the binary
    # (../share/qemu): point it at the Debian directories explicitly.
    return Qemu(str(base / info["binary"]), datadir=FIRMWARE_DIRS, name=name, version=info["version"])


def _system_source_version():
    """Debian source version of the host's qemu-system-x86 ("1:7.2+dfsg-7+deb12u18"), or None."""
    p = subprocess.run(["dpkg-query", "-W", "-f=${source:Version}", "qemu-system-x86"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def _build(name, base, patch, log):
    for tool, pkg in BUILD_TOOLS.items():
        if shutil.which(tool) is None:
            raise HarnessError(f"building QEMU '{name}' needs {tool}: install Debian's {pkg} (make deps)")
    suite, sources = BUILDS[name][1]
    apt = _Apt(suite=suite, sources=sources)
    work = base / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    try:
        apt.update(error=FetchError)
        # The host's own QEMU version when the mirror still has it, else bookworm's newest.
        want = _system_source_version()
        try:
            apt.source("qemu", want, work, error=FetchError)
        except FetchError as e:
            if want is None:
                raise
            log(f"emunode: QEMU source {want} (the host's) could not be fetched ({e}); "
                f"trying the suite's newest")
            want = None
            apt.source("qemu", None, work, error=FetchError)
        (dsc,) = work.glob("qemu_*.dsc")
        version = dsc.name[len("qemu_"):-len(".dsc")]
        log(f"emunode: building QEMU '{name}' from Debian source {version} + {patch.name} "
            f"(x86_64-softmmu only; ~10-20 min on 2 cores, once)")
        src = work / "src"
        # apt checked the files against the signed Sources index; dpkg-source applies
        # Debian's patches (the host QEMU has them too).
        _run(["dpkg-source", "--no-check", "-x", str(dsc), str(src)], "unpacking the QEMU source")
        _run(["patch", "-p1", "--forward", "-i", str(patch)], f"applying {patch.name}", cwd=src)
        bld = src / "build-emunode"
        bld.mkdir()
        _run(["../configure", *CONFIGURE], "configuring QEMU", cwd=bld)
        jobs = os.environ.get("EMUNODE_JOBS") or str(os.cpu_count() or 2)
        _run(["ninja", "-j", jobs, "qemu-system-x86_64"], "building QEMU", cwd=bld)
        out = base / "bin"
        out.mkdir(exist_ok=True)
        shutil.copy2(bld / "qemu-system-x86_64", out / "qemu-system-x86_64")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    binary = out / "qemu-system-x86_64"
    banner = _run([str(binary), "--version"], f"running the built QEMU '{name}'").splitlines()[0]
    props = _run([str(binary), "-device", "xio3130-downstream,help"], "listing xio3130 properties")
    if "disable-acs" not in props:
        raise HarnessError(f"QEMU '{name}' was built but its xio3130-downstream has no ACS property")
    info = {"name": name, "version": f"{banner.split('version ')[-1]} + {patch.name}",
            "source": version, "host_source": _system_source_version(),
            "binary": str(binary.relative_to(base)),
            "patch_sha256": _patch_digest(patch)}
    (base / "manifest.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"emunode: QEMU '{name}' ready: {info['version']}")
    return info
