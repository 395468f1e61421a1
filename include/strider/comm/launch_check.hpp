#pragma once
/// \file
/// The launch check: a process that its launcher started as one of several (torchrun, srun without
/// an MPI plugin, an mpirun of another MPI library) but whose MPI world has one process would read
/// the whole epoch alone, in the same order as its siblings. The check reads what the launcher told
/// the process through its environment and refuses such a start with one line that says how to
/// launch instead. MpiRuntime and the Python module make it after MPI_Init, before any collective.

#include <map>
#include <string>

namespace strider {

/// The variable that silences the check (value "1"), for a launcher that sets the variables below
/// for other reasons.
inline constexpr const char* kIgnoreLauncherVariable = "STRIDER_IGNORE_LAUNCHER";

/// What check_launch decided.
struct LaunchVerdict {
  bool accepted = true;        ///< false: the launcher started more processes than MPI's world holds
  std::string launcher;        ///< the launcher that said so, with its variables ("torchrun (WORLD_SIZE=2, ...)")
  int launched_processes = 1;  ///< how many processes the launcher said it started (a lower bound for PMIx)
  std::string message;         ///< the error line when not accepted: what launched, what MPI sees, what to do
};

/// Decides from the launcher's environment variables whether this process's MPI world (of
/// `mpi_world_size` processes) holds every process the launcher started. Pure: reads only
/// `environment` (name to value; a missing name is an unset variable). Accepted when MPI's world has
/// more than one process, when STRIDER_IGNORE_LAUNCHER is "1", and when no launcher says more than
/// one process. Counted, nearest launcher first:
/// - torchrun: WORLD_SIZE (RANK, LOCAL_RANK named in the message);
/// - Open MPI's mpirun: OMPI_COMM_WORLD_SIZE; MPICH/Hydra's mpiexec: PMI_SIZE;
/// - a Slurm step: SLURM_STEP_NUM_TASKS with SLURM_STEP_ID naming a step of srun's (not the batch
///   script, whose environment has no step variables, nor the batch, extern or interactive step);
///   ignored where an MPI launcher's variables are set (mpirun starts its processes from daemons
///   that run in a Slurm step of one task per node). The job's own task count (SLURM_NTASKS,
///   SLURM_NPROCS, SLURM_JOB_NUM_NODES) is an allocation, not a launch, and never counts;
/// - PMIx: PMIX_RANK above 0 means at least PMIX_RANK + 1 processes.
/// A value that is not a whole number is not a launcher's and is ignored.
LaunchVerdict check_launch(const std::map<std::string, std::string>& environment, int mpi_world_size);

/// The variables check_launch reads, as this process's environment has them (unset ones absent).
std::map<std::string, std::string> launch_environment();

/// Throws UsageError with the verdict's message when check_launch(launch_environment(),
/// mpi_world_size) refuses. Not collective: every process of a world decides alike on its own.
void require_launch_matches_mpi(int mpi_world_size);

}  // namespace strider
