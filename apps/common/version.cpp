// What --version prints. STRIDER_COMMIT is set on this file alone (apps/CMakeLists.txt), so that a new
// commit recompiles one small file.
#include <H5public.h>
#include <mpi.h>

#include <boost/version.hpp>
#include <string>

#include "common/cli.hpp"
#include "strider/config.hpp"
#include "strider/device/gpu_probe.hpp"

#ifndef STRIDER_COMMIT
#define STRIDER_COMMIT "unknown"
#endif

namespace strider::cli {

std::string version_text(const std::string& program) {
  std::string mpi;
#if defined(OPEN_MPI)
  mpi = "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
        std::to_string(OMPI_RELEASE_VERSION);
#else
  mpi = "MPI";
#endif
  mpi += " (MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + ")";
#ifdef H5_HAVE_PARALLEL
  const std::string hdf5_parallel = " (parallel)";
#else
  const std::string hdf5_parallel = " (serial)";
#endif
  const std::string hdf5 = "HDF5 " + std::to_string(H5_VERS_MAJOR) + "." + std::to_string(H5_VERS_MINOR) + "." +
                           std::to_string(H5_VERS_RELEASE) + hdf5_parallel;
  const std::string boost =
      "Boost " + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000);
#if defined(__clang__)
  const std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = "gcc " __VERSION__;
#else
  const std::string compiler = "an unknown compiler";
#endif
  return program + " (strider) " + STRIDER_VERSION_STRING + ", commit " + STRIDER_COMMIT + "\n" + "built with " +
         gpu_build_versions() + ", " + hdf5 + ", " + mpi + ", " + boost + ", " + compiler + "\n";
}

}  // namespace strider::cli
