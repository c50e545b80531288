"""Run every benchmark script in bench/ (``make bench``); stops at the first one that fails."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

scripts = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_") and p.name != "run_all.py")
if not scripts:
    sys.exit("no benchmark scripts found in bench/")
for script in scripts:
    print(f"== {script.name}", flush=True)
    subprocess.run([sys.executable, str(script), *sys.argv[1:]], check=True)
