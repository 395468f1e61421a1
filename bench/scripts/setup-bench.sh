#!/usr/bin/env bash
# Optional extras for the side-by-side benchmarks (bench/scripts/compare.sh, storage.sh), on top of
# what scripts/setup.sh installs for the build and tests: the PyTorch + h5py peer (h5py against the
# same parallel HDF5), mpi4py, matplotlib for the plots, Google Benchmark for the sampler
# microbenchmarks, and fio (storage.sh's limit; setup.sh has it too, for storage.sh's quick test). Not
# needed to build or test strider; CI does not run this. Idempotent; needs root (or sudo) only when
# something is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STRIDER_EXTRA_PACKAGES="${STRIDER_EXTRA_PACKAGES:-} python3-torch python3-numpy python3-h5py-mpi python3-mpi4py python3-matplotlib libbenchmark-dev fio" \
  exec "$here/../../scripts/setup.sh"
