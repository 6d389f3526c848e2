"""The guest's initramfs: a cached base archive per kernel plus a small per-run overlay.

The kernel unpacks concatenated cpio archives in order, later entries replacing earlier ones, so
the expensive part (busybox, host tools and their libraries, kernel modules) is built once per
kernel and each run only appends its commands, our binaries and our modules.
"""

import gzip
import hashlib
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

from . import kernels
from .errors import HarnessError
from .paths import REPO, build_dir, cache_dir

# Tools the guest needs from the host (Debian packages named in `make deps`).
HOST_TOOLS = {
    "busybox": "busybox-static",
    "lspci": "pciutils", "setpci": "pciutils",
    "ip": "iproute2", "rdma": "iproute2",
    "ibv_devinfo": "ibverbs-utils", "ibv_devices": "ibverbs-utils",
    "ibv_rc_pingpong": "ibverbs-utils",
}
# Taken when the host has them (benchmarks only): perftest, the reference RDMA benchmark.
OPTIONAL_HOST_TOOLS = {"ib_write_bw": "perftest", "ib_read_bw": "perftest", "ib_send_lat": "perftest",
                       "ib_read_lat": "perftest"}
HOST_DATA = [
    "/usr/share/misc/pci.ids",
    "/etc/libibverbs.d/rxe.driver",
]
RXE_PROVIDER_GLOB = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so"

# Kernel modules for the node: the NIC, then the RDMA stack. A trailing '?' marks modules that
# newer kernels fold into the core (crc32_generic became a library in 6.x).
GUEST_MODULES = ["e1000e", "crc32_generic?", "ib_core", "ib_uverbs", "rdma_rxe"]

BASE_FORMAT = 4  # bump when the base archive's layout changes


class Cpio:
    """A minimal writer of the 'newc' cpio format the kernel's initramfs unpacker reads."""

    def __init__(self):
        self.parts = []
        self.ino = 1
        self.dirs = set()

    def _entry(self, name, mode, data=b""):
        name = name.lstrip("/")
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08X}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        self.ino += 1
        self.parts += [hdr.encode(), nb, b"\0" * ((4 - (110 + len(nb)) % 4) % 4),
                       data, b"\0" * ((4 - len(data) % 4) % 4)]

    def mkdir(self, path):
        path = path.strip("/")
        if not path or path in self.dirs:
            return
        self.mkdir(os.path.dirname(path))
        self.dirs.add(path)
        self._entry(path, stat.S_IFDIR | 0o755)

    def file(self, path, data, mode=0o644):
        self.mkdir(os.path.dirname(path.strip("/")))
        self._entry(path, stat.S_IFREG | mode, data)

    def symlink(self, path, target):
        self.mkdir(os.path.dirname(path.strip("/")))
        self._entry(path, stat.S_IFLNK | 0o777, target.encode())

    def bytes(self):
        self._entry("TRAILER!!!", 0)
        return b"".join(self.parts)


def _which(tool):
    for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        p = Path(d) / tool
        if p.exists():
            return p
    return None


def _libraries(binary):
    """Shared libraries (and the ELF interpreter) that `binary` needs, from ldd."""
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    if p.returncode != 0 or "not a dynamic executable" in p.stdout + p.stderr:
        return []
    libs = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            i = parts.index("=>")
            if i + 1 < len(parts) and parts[i + 1].startswith("/"):
                libs.append(parts[i + 1])
            elif i + 1 < len(parts) and parts[i + 1] == "not":
                raise HarnessError(f"{binary}: shared library {parts[0]} not found on this host")
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def add_elf(cpio, src, dest, seen):
    """Add an executable or library at `dest` plus every library it needs at its host path."""
    data = Path(src).read_bytes()
    cpio.file(dest, data, 0o755)
    for lib in _libraries(src):
        if lib not in seen:
            seen.add(lib)
            cpio.file(lib, Path(lib).resolve().read_bytes(), 0o755)


def base_archive(kernel):
    """Build (once) and return the cached base archive for `kernel`."""
    tools = {}
    for tool, pkg in HOST_TOOLS.items():
        p = _which(tool)
        if p is None:
            raise HarnessError(f"'{tool}' not found on this host: install Debian's {pkg} (make deps)")
        tools[tool] = p
    for tool in OPTIONAL_HOST_TOOLS:
        p = _which(tool)
        if p is not None:
            tools[tool] = p
    providers = sorted(Path("/").glob(RXE_PROVIDER_GLOB.lstrip("/")))
    if not providers:
        raise HarnessError("rdma-core's rxe provider (librxe-rdmav*.so) not found: install "
                           "Debian's ibverbs-providers (make deps)")
    key = hashlib.sha256(repr((BASE_FORMAT, kernel.release, kernel.build_id, GUEST_MODULES,
                               sorted(map(str, tools.values())))).encode()).hexdigest()[:12]
    out = cache_dir() / "initramfs" / f"base-{kernel.name}-{key}.cpio.gz"
    if out.exists():
        return out

    cpio, seen = Cpio(), set()
    for d in ("bin", "sbin", "dev", "proc", "sys", "tmp", "run", "out", "etc", "root",
              "usr/bin", "usr/sbin", "mnt", "var"):
        cpio.mkdir(d)
    cpio.file("bin/busybox", tools["busybox"].read_bytes(), 0o755)
    for tool, path in tools.items():
        if tool != "busybox":
            add_elf(cpio, path, f"usr/bin/{tool}", seen)
    for prov in providers:
        add_elf(cpio, prov, str(prov), seen)
    for data in HOST_DATA:
        if Path(data).exists():
            cpio.file(data, Path(data).read_bytes())
    cpio.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    cpio.file("etc/group", b"root:x:0:\n")

    wanted = [m.rstrip("?") for m in GUEST_MODULES]
    optional = {m.rstrip("?") for m in GUEST_MODULES if m.endswith("?")}
    present = []
    for name in wanted:
        try:
            order = kernels.module_load_order(kernel, [name])
        except HarnessError:
            if name in optional:
                continue
            raise
        for rel in order:
            if rel not in present:
                present.append(rel)
    lines = []
    for rel in present:
        ko = kernels.module_file(kernel, rel)
        dest = f"lib/modules/{kernel.release}/{ko.name}"
        cpio.file(dest, ko.read_bytes())
        lines.append(dest)
    # depmod's index files, so tools that ask libkmod (lspci -k, -vvv) find them.
    for index in sorted(kernel.moddir.glob("modules.*")):
        if index.is_file() and index.stat().st_size < 8 << 20:
            cpio.file(f"lib/modules/{kernel.release}/{index.name}", index.read_bytes())
    # The order the guest's init loads the stack in, dependencies first.
    cpio.file("etc/emunode-modules", ("\n".join("/" + l for l in lines) + "\n").encode())

    out.parent.mkdir(parents=True, exist_ok=True)
    # a name of this process and thread: the two nodes of a pair (or two test runs) may build
    # the same base at once; the last rename wins, with identical contents
    tmp = out.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    with gzip.open(tmp, "wb", compresslevel=1) as f:
        f.write(cpio.bytes())
    os.replace(tmp, out)
    return out


def overlay_archive(kernel, commands, env, dest, files):
    """The per-run archive: /init, the commands, our binaries, modules and topology data."""
    cpio, seen = Cpio(), set()
    init = (Path(__file__).parent / "guest_init.sh").read_bytes()
    cpio.file("init", init, 0o755)
    cpio.file("usr/bin/emunode-host", (Path(__file__).parent / "emunode-host.sh").read_bytes(), 0o755)
    cpio.file("etc/emunode-env", "".join(f"export {k}='{v}'\n" for k, v in env.items()).encode())
    for i, cmd in enumerate(commands):
        cpio.file(f"etc/emunode-cmd/{i:04d}", cmd.encode())
    for path, data in files.items():
        if not path.startswith("/") or path.startswith(("/tmp/", "/proc/", "/sys/", "/dev/")):
            raise HarnessError(f"guest file path '{path}' must be absolute and not under "
                               "/tmp, /proc, /sys or /dev (those are mounted over)")
        cpio.file(path, bytes(data))
    bindir = build_dir() / "bin"
    if bindir.is_dir():
        for f in sorted(bindir.iterdir()):
            if f.is_file() and os.access(f, os.X_OK):
                add_elf(cpio, f, f"gdrpeer/bin/{f.name}", seen)
    moddir = build_dir() / "kmod" / kernel.name
    if moddir.is_dir():
        for ko in sorted(moddir.glob("*.ko")):
            cpio.file(f"gdrpeer/modules/{ko.name}", ko.read_bytes())
    topo = REPO / "topology"
    if topo.is_dir():
        for f in sorted(topo.rglob("*")):
            if f.is_file():
                cpio.file(f"gdrpeer/topology/{f.relative_to(topo)}", f.read_bytes())
    cpio.mkdir("gdrpeer/modules")
    cpio.mkdir("gdrpeer/bin")
    Path(dest).write_bytes(cpio.bytes())
    return Path(dest)


def initrd_for_run(kernel, commands, env, workdir, files):
    """One initrd file for QEMU: the base archive followed by this run's overlay."""
    base = base_archive(kernel)
    overlay = overlay_archive(kernel, commands, env, Path(workdir) / "overlay.cpio", files)
    initrd = Path(workdir) / "initrd.img"
    with open(initrd, "wb") as out:
        with open(base, "rb") as b:
            shutil.copyfileobj(b, out)
        # The kernel reads an uncompressed cpio only at a 4-byte aligned offset; zeros between
        # archives are skipped.
        out.write(b"\0" * ((4 - out.tell() % 4) % 4))
        out.write(overlay.read_bytes())
    return initrd
