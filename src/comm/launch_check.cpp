#include "strider/comm/launch_check.hpp"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "strider/core/error.hpp"

namespace strider {

namespace {

// The launchers' variables check_launch reads (STRIDER_IGNORE_LAUNCHER is read on its own).
constexpr const char* kLaunchVariables[] = {
    "WORLD_SIZE", "RANK",      "LOCAL_RANK",           "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE",
    "PMI_RANK",   "PMIX_RANK", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID",        "SLURM_PROCID"};

/// The variable's value when it is set to a whole number (surrounding blanks allowed), else nothing.
std::optional<long> whole_number(const std::map<std::string, std::string>& environment, const char* name) {
  const auto found = environment.find(name);
  if (found == environment.end() || found->second.empty()) return std::nullopt;
  const char* text = found->second.c_str();
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  while (end != nullptr && (*end == ' ' || *end == '\t')) ++end;
  if (errno != 0 || end == text || *end != '\0') return std::nullopt;
  return value;
}

/// "NAME=value" for each variable of `names` that is set, joined by ", ".
std::string named_values(const std::map<std::string, std::string>& environment,
                         std::initializer_list<const char*> names) {
  std::string text;
  for (const char* name : names) {
    const auto found = environment.find(name);
    if (found == environment.end()) continue;
    if (!text.empty()) text += ", ";
    text += std::string(name) + "=" + found->second;
  }
  return text;
}

/// Whether SLURM_STEP_ID names a step srun launched: a number below Slurm's special step ids
/// (batch, extern, interactive, pending: the top of the 32-bit range), not a name.
bool is_srun_step(const std::map<std::string, std::string>& environment) {
  const std::optional<long> step = whole_number(environment, "SLURM_STEP_ID");
  return step && *step >= 0 && *step < 0xfffffff0L;
}

struct Claim {
  std::string launcher;   // "torchrun (WORLD_SIZE=2, RANK=1)"
  long processes = 1;     // at least this many processes
  std::string help;       // what to do instead
  bool at_least = false;  // processes is a lower bound (PMIx's rank)
};

/// What to do instead of a launcher that is not MPI's, for `processes` processes ("N" for 0: unknown).
std::string mpi_launch_help(long processes) {
  const std::string n = processes > 0 ? std::to_string(processes) : "N";
  return "launch with MPI's launcher: `mpirun -np " + n + " ...` (`srun --mpi=pmix -n " + n +
         " ...` in a Slurm job); for a torch DDP job start it with mpirun and initialise torch.distributed from "
         "MPI's rank and size, as examples/train_torch.py does";
}

std::optional<Claim> first_claim(const std::map<std::string, std::string>& environment) {
  if (const auto size = whole_number(environment, "WORLD_SIZE"); size && *size > 1)
    return Claim{"torchrun (" + named_values(environment, {"WORLD_SIZE", "RANK", "LOCAL_RANK"}) + ")", *size,
                 mpi_launch_help(*size)};
  const auto ompi_size = whole_number(environment, "OMPI_COMM_WORLD_SIZE");
  if (ompi_size && *ompi_size > 1)
    return Claim{
        "Open MPI's mpirun (" + named_values(environment, {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}) + ")",
        *ompi_size,
        "the MPI library strider was built with is not the one of this mpirun: launch with the mpirun of "
        "strider's MPI (`mpirun --version` and `ldd` on strider's library must name the same MPI)"};
  const auto pmi_size = whole_number(environment, "PMI_SIZE");
  if (pmi_size && *pmi_size > 1)
    return Claim{"MPICH/Hydra's mpiexec (" + named_values(environment, {"PMI_SIZE", "PMI_RANK"}) + ")", *pmi_size,
                 "the MPI library strider was built with is not the one of this mpiexec: launch with the mpiexec "
                 "of strider's MPI (`mpiexec --version` and `ldd` on strider's library must name the same MPI)"};
  const bool mpi_launcher = ompi_size || pmi_size;  // its daemons may run in a Slurm step: not ours
  const auto step_tasks = whole_number(environment, "SLURM_STEP_NUM_TASKS");
  if (!mpi_launcher && step_tasks && *step_tasks > 1 && is_srun_step(environment))
    return Claim{"srun (" + named_values(environment, {"SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID", "SLURM_PROCID"}) + ")",
                 *step_tasks,
                 "srun must wire the step's tasks into one MPI world: `srun --mpi=pmix -n " +
                     std::to_string(*step_tasks) +
                     " ...` (`srun --mpi=list` shows the plugins; where there is none, `mpirun -np " +
                     std::to_string(*step_tasks) + " ...` inside the allocation)"};
  if (const auto pmix_rank = whole_number(environment, "PMIX_RANK"); pmix_rank && *pmix_rank > 0)
    return Claim{"a PMIx launcher (PMIX_RANK=" + std::to_string(*pmix_rank) + ")", *pmix_rank + 1, mpi_launch_help(0),
                 true};
  return std::nullopt;
}

}  // namespace

LaunchVerdict check_launch(const std::map<std::string, std::string>& environment, int mpi_world_size) {
  LaunchVerdict verdict;
  if (mpi_world_size > 1) return verdict;
  const auto ignore = environment.find(kIgnoreLauncherVariable);
  if (ignore != environment.end() && ignore->second == "1") return verdict;
  const std::optional<Claim> claim = first_claim(environment);
  if (!claim) return verdict;
  verdict.accepted = false;
  verdict.launcher = claim->launcher;
  verdict.launched_processes = static_cast<int>(claim->processes);
  verdict.message = claim->launcher + " started this process as one of " + (claim->at_least ? "at least " : "") +
                    std::to_string(claim->processes) + " but MPI's world has " + std::to_string(mpi_world_size) +
                    " process: each would run alone and read every sample; " + claim->help + " (" +
                    kIgnoreLauncherVariable + "=1 skips this check)";
  return verdict;
}

std::map<std::string, std::string> launch_environment() {
  std::map<std::string, std::string> environment;
  for (const char* name : kLaunchVariables) {
    if (const char* value = std::getenv(name)) environment[name] = value;
  }
  if (const char* ignore = std::getenv("STRIDER_IGNORE_LAUNCHER")) environment[kIgnoreLauncherVariable] = ignore;
  return environment;
}

void require_launch_matches_mpi(int mpi_world_size) {
  const LaunchVerdict verdict = check_launch(launch_environment(), mpi_world_size);
  if (!verdict.accepted) STRIDER_THROW(UsageError, verdict.message);
}

}  // namespace strider
