#!/usr/bin/env bash
# Installs the Debian 12 packages strider's build and tests need, skipping those already present.
# Idempotent; safe to run again. Needs root (or sudo) only when something is missing.
#   scripts/setup.sh          everything: the build, the Python module, the tests and their tools
#   scripts/setup.sh --core   only what scripts/quickstart.sh needs: the library, the apps, the plot
set -euo pipefail

set_name=all
case ${1:-} in
  "") ;;
  --core) set_name=core ;;
  *) echo "usage: scripts/setup.sh [--core]" >&2; exit 2 ;;
esac

core=(
  g++ cmake ninja-build pkg-config       # toolchain
  ccache                                 # compiler cache: a rebuild in any clone reuses earlier compiles
  libopenmpi-dev openmpi-bin             # MPI
  libhdf5-openmpi-dev                    # parallel HDF5 1.10
  libdeflate-dev                         # inflates HDF5's deflate chunks (zlib without it)
  libboost-program-options-dev           # the apps' options
  python3 python3-matplotlib             # scripts/plot-stats.py draws a run's --json
)
packages=("${core[@]}")
[[ $set_name == core ]] || packages+=(
  catch2                                 # tests (Catch2 2.13)
  procps                                 # tests: pgrep/ps find a rank to kill
  time                                   # tests: /usr/bin/time measures a run's peak RSS
  fio                                    # tests: bench/scripts/storage.sh (fio's limit, the summary)
  clang-format-14                        # scripts/check-format.sh: the one pinned formatter
  python3-h5py                           # tests: files written as users write them (h5py)
  munge slurmctld slurmd slurm-client    # tests: a real one-node Slurm cluster (test_slurm.sh)
  pybind11-dev python3-dev python3-numpy # the Python module (STRIDER_BUILD_PYTHON)
  python3-pytest python3-mpi4py          # its tests (pytest under ctest, mpi4py communicators)
  python3-skbuild python3-venv           # pip install of the module (pyproject.toml, tests/integration/test_pip.sh)
  python3-torch libtorch-dev             # tests against torch, examples/train_torch.py, examples/libtorch_trainer
)
# python3-torch is the largest: about 80 MB to download and 1 GB installed with its dependencies
# (libtorch-dev, the LibTorch example's headers, is a few MB more), about 1.5 minutes to install here.
# Extra packages for optional parts, named in the environment (e.g. STRIDER_EXTRA_PACKAGES="clang").
# The benchmarks' peers (torch, h5py-mpi) come this way: bench/scripts/setup-bench.sh.
read -r -a extra <<<"${STRIDER_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")

missing=()
for package in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    continue
  fi
  missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists once if they are missing or older than a day.
if [[ -z $(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1) ]]; then
  $sudo apt-get update -qq
fi
# Packages with daemons (munge, slurmctld, slurmd) start their system services on install where
# policy-rc.d allows it. The tests start their own daemons and nothing else should run, so deny
# service starts during the install unless a policy is already in place (Debian's container images
# ship one that denies them).
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# Written by strider setup.sh for the length of one install.\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
