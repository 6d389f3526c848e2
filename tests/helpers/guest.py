"""What the emulated-node tests share beyond emunode itself."""

import warnings


def say_lockdep_off(res):
    """One line per accepted report: lockdep checked nothing after it in that boot."""
    for name in res.known_reports():
        msg = (f"{res.kernel}: accepted the kernel's own lockdep report {name}; lockdep is off "
               f"for the rest of this boot (KASAN, KFENCE, DMA-API, ODEBUG and WARN still count)")
        print(msg)
        warnings.warn(msg)
