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
from pathlib import Path

import pytest

from conftest import vm_kernel
from emunode import kernels
from helpers.dkms_guest import boot_and_modprobe, sh
from helpers.paths import REPO

VERSION = re.search(r'^PACKAGE_VERSION="(.*)"', (REPO / "dkms.conf").read_text(), re.M).group(1)


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
