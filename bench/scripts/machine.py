"""The machine a benchmark ran on, as bench/results/*.json record it (the "machine" object that
scripts/docs/gen-performance.py prints beside each figure): CPU model, cores, memory, kernel,
compiler, MPI, the commit measured and the date."""
import datetime
import os
import platform
import re
import subprocess


def command_line(*command):
    try:
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        memory_kib = int(re.search(r"MemTotal:\s+(\d+)", meminfo.read()).group(1))
    repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 2**20, 1),
        "kernel": platform.release(),
        "compiler": command_line("c++", "--version").splitlines()[0] if command_line("c++", "--version") else "",
        "mpi": command_line("mpirun", "--version").splitlines()[0] if command_line("mpirun", "--version") else "",
        "commit": command_line("git", "-C", repository, "rev-parse", "--short", "HEAD"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }
