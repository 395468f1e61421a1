"""The machine a benchmark ran on, as bench/results/*.json record it (the "machine" object that
scripts/docs/gen-performance.py prints beside each figure): CPU model, cores, memory, whether it is
a virtual machine, the OS, kernel, compiler, MPI, HDF5, the commit measured and the date; with
`packages`, the versions of those Python packages (the PyTorch peer's torch and h5py)."""
import datetime
import os
import platform
import re
import subprocess
import sys


def command_line(*command):
    try:
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def os_name():
    """`Debian 12` from /etc/os-release."""
    try:
        with open("/etc/os-release") as release:
            fields = dict(line.rstrip("\n").split("=", 1) for line in release if "=" in line)
    except OSError:
        return platform.system()
    name = fields.get("NAME", "").strip('"').split(" ")[0]
    return f"{name} {fields.get('VERSION_ID', '').strip(chr(34))}".strip()


def hdf5_version():
    match = re.search(r"HDF5 Version:\s*(\S+)", command_line("h5pcc", "-showconfig"))
    return match.group(1) if match else ""


def package_version(name):
    return command_line(sys.executable, "-c", f"import {name}; print({name}.__version__)")


def machine(packages=()):
    cpu = ""
    virtual = False
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name") and not cpu:
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and " hypervisor" in line:
                virtual = True
    with open("/proc/meminfo") as meminfo:
        memory_kib = int(re.search(r"MemTotal:\s+(\d+)", meminfo.read()).group(1))
    repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    described = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 2**20, 1),
        "kind": "virtual machine" if virtual else "machine",
        "os": os_name(),
        "kernel": platform.release(),
        "compiler": command_line("c++", "--version").splitlines()[0] if command_line("c++", "--version") else "",
        "mpi": command_line("mpirun", "--version").splitlines()[0] if command_line("mpirun", "--version") else "",
        "hdf5": hdf5_version(),
        "commit": command_line("git", "-C", repository, "rev-parse", "--short", "HEAD"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }
    for name in packages:
        described[name] = package_version(name)
    return {key: value for key, value in described.items() if value != ""}
