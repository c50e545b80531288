"""Which processes run now, read from /proc independently of fedbound's watchdog (the deployment tests' check
that nothing is left running)."""

from __future__ import annotations

import os
from pathlib import Path


def live_commands() -> dict[int, str]:
    """pid -> command line of every live process but this one (zombies, which have ended, left out)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{entry}/stat").read_text(errors="replace")
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] not in "ZX":
            found[int(entry)] = cmd
    return found
