"""The config files of a gdrpeer snapshot as `lspci -xxxx` prints them, for `lspci -F` to decode.

    tar xf ../h200x4-run2-snapshot.tar -C /tmp/run2
    python3 snapshot_config_dump.py /tmp/run2 > /tmp/run2.dump
    lspci -F /tmp/run2.dump -vvv -nn > h200x4-run2-lspci-vvv.txt     # pciutils 3.9.0
"""
import glob
import os
import sys

root = sys.argv[1]
for d in sorted(glob.glob(root + "/sys/devices/pci0000:00/*/")):
    config = open(d + "config", "rb").read()
    print(os.path.basename(d.rstrip("/"))[5:] + " config")
    for i in range(0, len(config), 16):
        print(f"{i:03x}: " + " ".join(f"{x:02x}" for x in config[i:i + 16]))
    print()
