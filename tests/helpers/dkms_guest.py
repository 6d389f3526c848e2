"""Booting the emulated node with a DKMS-built gdrpeer.ko in its module tree and the shipped
modprobe.d file, udev rule and sysusers.d group: `modprobe gdrpeer` and udev as on a node
(tests/test_dkms.py builds the module on this host, tests/test_packages.py in a clean chroot)."""

import re
import shutil
import subprocess
from pathlib import Path

from helpers.paths import REPO

# Guest tools the test needs beyond the node's busybox: kmod's modprobe and systemd's udevd.
GUEST_TOOLS = {"/sbin/modprobe": "/bin/kmod", "/sbin/udevadm": "/bin/udevadm",
               "/lib/systemd/systemd-udevd": "/bin/udevadm"}
GDRPEER_GID = 977


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}: rc={p.returncode}\n{p.stdout}{p.stderr}"
    return p.stdout


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
