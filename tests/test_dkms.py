"""DKMS for real (docs/fleet.md): `dkms add`, `build`, `autoinstall`, `remove` of the tree that
`make dkms-source` stages, on this host, for the guest kernel (Debian's linux-headers package,
unpacked by tests/emunode), in a private DKMS tree (--dkmstree/--sourcetree/--installtree: the
host's /var/lib/dkms and /lib/modules are never touched). Then the emulated node boots with the
DKMS-installed module in its module tree, `modprobe gdrpeer` takes `pcibar=` from the shipped
/etc/modprobe.d/gdrpeer.conf, and systemd-udevd applies the shipped udev rule to /dev/gdrpeer.

BUILD_DEPENDS: dkms.conf names an NVIDIA DKMS module only where one is added; DKMS 3.0 refuses to
autoinstall a module whose dependency is not a DKMS module (no gdrpeer for a new kernel on a node
whose NVIDIA driver is prebuilt), which the autoinstall here would catch.

Kernels: VM_KERNEL (6.1 in `make test`); `make test-kernels` adds GDRPEER_DKMS_KERNELS' others.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import vm_kernel
from emunode import kernels

REPO = Path(__file__).resolve().parents[1]
VERSION = re.search(r'^PACKAGE_VERSION="(.*)"', (REPO / "dkms.conf").read_text(), re.M).group(1)
# Guest tools the test needs beyond the node's busybox: kmod's modprobe and systemd's udevd.
GUEST_TOOLS = {"/sbin/modprobe": "/bin/kmod", "/sbin/udevadm": "/bin/udevadm",
               "/lib/systemd/systemd-udevd": "/bin/udevadm"}
GDRPEER_GID = 977


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}: rc={p.returncode}\n{p.stdout}{p.stderr}"
    return p.stdout


class Dkms:
    """dkms with every tree below `root`."""

    def __init__(self, root):
        self.root = root
        self.installtree = root / "lib" / "modules"
        for d in ("tree", "src", "lib/modules"):
            (root / d).mkdir(parents=True, exist_ok=True)

    def __call__(self, *args):
        if not shutil.which("dkms"):
            pytest.fail("dkms is missing: install the Debian package dkms (make deps)")
        # Each kernel's headers name the gcc its Debian release was built with (gcc-10 for 5.10,
        # gcc-14 for 6.12), which a node has beside its headers; this host builds them with its own
        # gcc, as tests/emunode/build.py does. make takes MAKEFLAGS' CC= as a command-line value.
        env = dict(os.environ, MAKEFLAGS="CC=gcc")
        return sh(["nice", "dkms", "--dkmstree", str(self.root / "tree"), "--sourcetree", str(self.root / "src"),
                   "--installtree", str(self.installtree), *map(str, args)], env=env)

    def status(self):
        return self("status", "-m", "gdrpeer").strip()


def staged_source():
    out = sh(["make", "-s", "-C", str(REPO), "dkms-source"]).strip().splitlines()[-1]
    return Path(out)


def dkms_install(kernel, tmp):
    """add, build, autoinstall for `kernel`; returns (Dkms, path of the installed module)."""
    dkms = Dkms(tmp)
    dkms("add", staged_source())
    assert dkms.status() == f"gdrpeer/{VERSION}: added"
    # --kernelsourcedir: the guest kernel's headers; install needs the kernel's module directory.
    (dkms.installtree / kernel.release).mkdir(parents=True, exist_ok=True)
    common = ["-k", kernel.release, "--kernelsourcedir", kernel.kdir, "--no-depmod"]
    dkms("build", "-m", "gdrpeer", "-v", VERSION, *common)
    assert re.fullmatch(rf"gdrpeer/{VERSION}, {re.escape(kernel.release)}, x86_64: built", dkms.status())
    # autoinstall, what a new kernel's postinst runs: BUILD_DEPENDS must not hold it back here.
    dkms("autoinstall", *common)
    assert re.fullmatch(rf"gdrpeer/{VERSION}, {re.escape(kernel.release)}, x86_64: installed", dkms.status())
    ko = dkms.installtree / kernel.release / "updates" / "dkms" / "gdrpeer.ko"
    assert ko.is_file()
    info = sh(["modinfo", "-F", "vermagic", str(ko)])
    assert info.split()[0] == kernel.release, info
    return dkms, ko


def module_tree_files(kernel, ko, tmp):
    """Guest files: the DKMS module in updates/dkms and depmod's indexes of the kernel's tree plus it."""
    base = tmp / "depmod-root"
    moddir = base / "lib" / "modules" / kernel.release
    moddir.mkdir(parents=True)
    for f in kernel.moddir.iterdir():
        if f.name.startswith("modules.") and f.is_file():
            shutil.copy2(f, moddir / f.name)
        elif f.name == "kernel":
            (moddir / "kernel").symlink_to(f)
    (moddir / "updates" / "dkms").mkdir(parents=True)
    shutil.copy2(ko, moddir / "updates" / "dkms" / "gdrpeer.ko")
    sh(["depmod", "-b", str(base), kernel.release])
    dep = (moddir / "modules.dep").read_text()
    assert "updates/dkms/gdrpeer.ko:" in dep, "depmod did not index the DKMS module"
    files = {f"/lib/modules/{kernel.release}/{f.name}": f.read_bytes()
             for f in moddir.iterdir() if f.name.startswith("modules.") and f.is_file()}
    files[f"/lib/modules/{kernel.release}/updates/dkms/gdrpeer.ko"] = ko.read_bytes()
    return files


def elf_files(guest_path, host_path):
    """A host program and the shared libraries it needs, at the paths the loader looks for them;
    not the loader itself (ldd's line without "=>"): the node's base archive has it, executable,
    and a copy from `files` (mode 0644) would replace it and stop every dynamic program in the
    guest with "Permission denied"."""
    files = {guest_path: Path(host_path).read_bytes()}
    for line in sh(["ldd", host_path]).splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m and "=>" in line:
            lib = line.split("=>")[-1].split("(")[0].strip() or m.group(1)
            files[lib] = Path(lib).resolve().read_bytes()
    return files


def guest_files(kernel, ko, tmp, modprobe_conf, udev_rule, sysusers_conf):
    files = module_tree_files(kernel, ko, tmp)
    for guest, host in GUEST_TOOLS.items():
        files.update(elf_files(guest, host))
    files["/etc/modprobe.d/gdrpeer.conf"] = Path(modprobe_conf).read_bytes()
    files["/etc/udev/rules.d/70-gdrpeer.rules"] = Path(udev_rule).read_bytes()
    # What systemd-sysusers makes of the shipped sysusers.d/gdrpeer.conf ("g gdrpeer -").
    assert Path(sysusers_conf).read_text().splitlines()[-1] == "g gdrpeer -"
    files["/etc/group"] = f"root:x:0:\ngdrpeer:x:{GDRPEER_GID}:\n".encode()
    return files


# The example's commented options line, made this node's: the GPU BAR device's BDF, and a
# dev_mode the udev rule must override (the rule's group is not the driver's default either).
GUEST_COMMANDS = [
    'sed -i "s|^#options gdrpeer pcibar=.*|options gdrpeer pcibar=$GDRPEER_GPU_BDF dev_mode=0600|" '
    '/etc/modprobe.d/gdrpeer.conf && grep "^options gdrpeer" /etc/modprobe.d/gdrpeer.conf',
    # (files come into the guest as plain files: the tools need their x bit)
    "chmod 755 /sbin/modprobe /sbin/udevadm /lib/systemd/systemd-udevd && mkdir -p /run/udev && "
    "/lib/systemd/systemd-udevd --daemon && sleep 1 && pidof systemd-udevd",
    "modprobe gdrpeer && modprobe --show-depends gdrpeer && cat /sys/class/gdrpeer/gdrpeer/devices/0/bdf",
    "udevadm settle -t 30; stat -c '%a %G' /dev/gdrpeer",
    "modprobe -r gdrpeer && ! test -e /sys/module/gdrpeer && echo removed",
]


def boot_and_modprobe(node_factory, kernel, ko, tmp, shipped=REPO / "packaging"):
    """Boot the node with `ko` in updates/dkms of the kernel's module tree; `modprobe gdrpeer` must
    load it with pcibar= from the shipped modprobe.d file, and the shipped udev rule must set
    /dev/gdrpeer's mode and group. `shipped`: {"modprobe", "udev", "sysusers"} -> path, or the
    source tree's packaging/ folder."""
    if isinstance(shipped, Path):
        shipped = {"modprobe": shipped / "modprobe.d/gdrpeer.conf", "udev": shipped / "udev/70-gdrpeer.rules",
                   "sysusers": shipped / "sysusers.d/gdrpeer.conf"}
    files = guest_files(kernel, ko, tmp, shipped["modprobe"], shipped["udev"], shipped["sysusers"])
    res = node_factory(topology="switch", iommu="off").run(GUEST_COMMANDS, files=files, timeout=900)
    opts, udevd, load, node, unload = res.results
    assert opts.status == 0 and re.search(r"^options gdrpeer pcibar=\S+:\S+ dev_mode=0600$", opts.output, re.M), opts.output
    assert udevd.status == 0, udevd.output
    assert load.status == 0, load.output
    assert f"/lib/modules/{kernel.release}/updates/dkms/gdrpeer.ko" in load.output, load.output
    bdf = opts.output.split("pcibar=")[1].split()[0]
    assert load.output.strip().splitlines()[-1] == bdf, "pcibar= from modprobe.d did not bind the BAR"
    # modprobe.d asked the driver for 0600 root (dev_gid=0): 0660 gdrpeer can only come from udev.
    assert node.status == 0 and node.output.strip().splitlines()[-1] == "660 gdrpeer", node.output
    assert unload.status == 0 and "removed" in unload.output, unload.output
    assert res.problems() == []


def test_dkms_cycle_and_modprobe_in_guest(tmp_path, node_factory):
    kernel = kernels.ensure_kernel(vm_kernel())
    dkms, ko = dkms_install(kernel, tmp_path / "dkms")
    boot_and_modprobe(node_factory, kernel, ko, tmp_path)

    dkms("remove", "-m", "gdrpeer", "-v", VERSION, "--all", "--no-depmod")
    assert dkms.status() == ""
    assert not ko.exists(), "dkms remove left the module installed"


def test_build_depends_names_only_present_nvidia_and_ofed_dkms_modules(tmp_path):
    """dkms.conf is shell: BUILD_DEPENDS follows what the DKMS tree holds."""
    def build_depends(tree):
        script = f'dkms_tree={tree}; . {REPO}/dkms.conf; echo "${{BUILD_DEPENDS[*]}}"'
        return sh(["bash", "-c", script]).strip()
    tree = tmp_path / "dkms"
    tree.mkdir()
    assert build_depends(tree) == ""
    (tree / "nvidia-current").mkdir()  # Debian's nvidia-kernel-dkms
    assert build_depends(tree) == "nvidia-current"
    (tree / "nvidia").mkdir()  # NVIDIA's own packages and .run --dkms
    assert build_depends(tree) == "nvidia"
    (tree / "mlnx-ofed-kernel").mkdir()  # MLNX_OFED / DOCA-OFED: the peer-memory client's headers
    assert build_depends(tree) == "nvidia mlnx-ofed-kernel"
    (tree / "nvidia").rmdir()
    (tree / "nvidia-current").rmdir()
    assert build_depends(tree) == "mlnx-ofed-kernel"


def test_dkms_autoinstall_other_kernels(tmp_path):
    """`make test-kernels`: a rebuild for each further kernel, as a new kernel's install runs it."""
    names = [k for k in os.environ.get("GDRPEER_DKMS_KERNELS", "").split() if k != vm_kernel()]
    if not names:
        pytest.skip("only in make test-kernels (GDRPEER_DKMS_KERNELS names the other kernels)")
    dkms = None
    for name in names:
        kernel = kernels.ensure_kernel(name)
        if dkms is None:
            dkms, _ = dkms_install(kernel, tmp_path / "dkms")
            continue
        (dkms.installtree / kernel.release).mkdir(parents=True, exist_ok=True)
        dkms("autoinstall", "-k", kernel.release, "--kernelsourcedir", kernel.kdir, "--no-depmod")
        assert f"{kernel.release}, x86_64: installed" in dkms.status()
        assert (dkms.installtree / kernel.release / "updates" / "dkms" / "gdrpeer.ko").is_file()
