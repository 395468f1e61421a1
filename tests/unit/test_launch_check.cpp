// The launch check (check_launch): a launcher that started several processes whose MPI world has one
// is refused with one line naming the launcher's variable, what MPI sees and how to launch; an
// allocation (sbatch's task count) is not a launch; launchers that agree with MPI, no launcher, and
// STRIDER_IGNORE_LAUNCHER=1 are accepted.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "scoped_variable.hpp"
#include "strider/comm/launch_check.hpp"
#include "strider/core/error.hpp"

using namespace strider;
using Environment = std::map<std::string, std::string>;
using strider::testing::ScopedVariable;

namespace {

void require_one_line(const LaunchVerdict& verdict) {
  REQUIRE_FALSE(verdict.accepted);
  REQUIRE(verdict.message.find('\n') == std::string::npos);
  REQUIRE_THAT(verdict.message, Catch::Contains("but MPI's world has 1 process") &&
                                    Catch::Contains("STRIDER_IGNORE_LAUNCHER=1 skips this check"));
}

}  // namespace

TEST_CASE("launch check: torchrun's two processes with an MPI world of one are refused", "[launch_check]") {
  const Environment torchrun{{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "1"}};
  const LaunchVerdict verdict = check_launch(torchrun, 1);
  require_one_line(verdict);
  REQUIRE(verdict.launched_processes == 2);
  REQUIRE_THAT(verdict.message,
               Catch::StartsWith("torchrun (WORLD_SIZE=2, RANK=1, LOCAL_RANK=1) started this process as one of 2") &&
                   Catch::Contains("`mpirun -np 2 ...`") && Catch::Contains("`srun --mpi=pmix -n 2 ...`") &&
                   Catch::Contains("initialise torch.distributed from MPI's rank and size") &&
                   Catch::Contains("examples/train_torch.py"));
}

TEST_CASE("launch check: an srun step of two tasks without an MPI plugin is refused", "[launch_check]") {
  const Environment step{{"SLURM_JOB_ID", "7"},         {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                         {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_NODES", "1"}};
  const LaunchVerdict verdict = check_launch(step, 1);
  require_one_line(verdict);
  REQUIRE(verdict.launched_processes == 2);
  REQUIRE_THAT(verdict.message, Catch::StartsWith("srun (SLURM_STEP_NUM_TASKS=2, SLURM_STEP_ID=0, SLURM_PROCID=1)") &&
                                    Catch::Contains("`srun --mpi=pmix -n 2 ...`"));
}

TEST_CASE("launch check: Open MPI's mpirun of two with an MPI world of one (another MPI library) is refused",
          "[launch_check]") {
  const Environment ompi{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}};
  const LaunchVerdict verdict = check_launch(ompi, 1);
  require_one_line(verdict);
  REQUIRE_THAT(verdict.message,
               Catch::StartsWith("Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_RANK=0)") &&
                   Catch::Contains("not the one of this mpirun"));
  // MPICH/Hydra alike.
  const LaunchVerdict hydra = check_launch({{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}}, 1);
  require_one_line(hydra);
  REQUIRE(hydra.launched_processes == 4);
  REQUIRE_THAT(hydra.message, Catch::StartsWith("MPICH/Hydra's mpiexec (PMI_SIZE=4, PMI_RANK=3)"));
}

TEST_CASE("launch check: PMIx's rank above 0 means at least rank + 1 processes", "[launch_check]") {
  const LaunchVerdict verdict = check_launch({{"PMIX_RANK", "2"}}, 1);
  require_one_line(verdict);
  REQUIRE(verdict.launched_processes == 3);
  REQUIRE_THAT(verdict.message, Catch::Contains("(PMIX_RANK=2) started this process as one of at least 3") &&
                                    Catch::Contains("`mpirun -np N ...`"));
  REQUIRE(check_launch({{"PMIX_RANK", "0"}}, 1).accepted);
}

TEST_CASE("launch check: a one-process run inside an allocation of several tasks is accepted", "[launch_check]") {
  // The batch script of `sbatch -n 2`: the job's task count, no step variables.
  const Environment batch{{"SLURM_JOB_ID", "1"}, {"SLURM_NTASKS", "2"},        {"SLURM_NPROCS", "2"},
                          {"SLURM_PROCID", "0"}, {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_LOCALID", "0"}};
  REQUIRE(check_launch(batch, 1).accepted);
  // The batch, extern and interactive steps, by name or by Slurm's special step ids.
  for (const char* special : {"batch", "extern", "interactive", "4294967291", "4294967292", "4294967294"}) {
    CAPTURE(special);
    Environment special_step = batch;
    special_step["SLURM_STEP_ID"] = special;
    special_step["SLURM_STEP_NUM_TASKS"] = "2";
    REQUIRE(check_launch(special_step, 1).accepted);
  }
  // `srun -n 1` inside it: a step of one task.
  Environment one_task_step = batch;
  one_task_step["SLURM_STEP_ID"] = "1";
  one_task_step["SLURM_STEP_NUM_TASKS"] = "1";
  REQUIRE(check_launch(one_task_step, 1).accepted);
}

TEST_CASE("launch check: mpirun's processes in a Slurm step of its daemons follow mpirun's count", "[launch_check]") {
  // `mpirun -np 1` in a two-node allocation: Open MPI starts a daemon per node with srun.
  const Environment under_daemons{{"SLURM_STEP_ID", "0"},
                                  {"SLURM_STEP_NUM_TASKS", "2"},
                                  {"OMPI_COMM_WORLD_SIZE", "1"},
                                  {"OMPI_COMM_WORLD_RANK", "0"}};
  REQUIRE(check_launch(under_daemons, 1).accepted);
}

TEST_CASE("launch check: nothing set, launchers that agree with MPI, and STRIDER_IGNORE_LAUNCHER=1 are accepted",
          "[launch_check]") {
  REQUIRE(check_launch({}, 1).accepted);
  const Environment all_say_two{{"WORLD_SIZE", "2"},           {"RANK", "1"},          {"OMPI_COMM_WORLD_SIZE", "2"},
                                {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"PMIX_RANK", "1"}};
  REQUIRE(check_launch(all_say_two, 2).accepted);
  const Environment all_say_one{{"WORLD_SIZE", "1"}, {"RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"PMI_SIZE", "1"}};
  REQUIRE(check_launch(all_say_one, 1).accepted);
  Environment silenced{{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"STRIDER_IGNORE_LAUNCHER", "1"}};
  REQUIRE(check_launch(silenced, 1).accepted);
  silenced["STRIDER_IGNORE_LAUNCHER"] = "0";
  REQUIRE_FALSE(check_launch(silenced, 1).accepted);
  // Values that are not a launcher's count are not a launch.
  REQUIRE(check_launch({{"WORLD_SIZE", "two"}, {"SLURM_STEP_NUM_TASKS", ""}}, 1).accepted);
}

TEST_CASE("launch check: require_launch_matches_mpi throws a UsageError (exit 2) with the verdict's line",
          "[launch_check]") {
  const ScopedVariable world_size("WORLD_SIZE", "3");
  const ScopedVariable ignore("STRIDER_IGNORE_LAUNCHER", nullptr);
  try {
    require_launch_matches_mpi(1);
    FAIL("WORLD_SIZE=3 with an MPI world of 1 was accepted");
  } catch (const UsageError& error) {
    REQUIRE(exit_code_for(error) == 2);
    REQUIRE_THAT(error_message(error), Catch::StartsWith("torchrun (WORLD_SIZE=3"));
  }
  REQUIRE_NOTHROW(require_launch_matches_mpi(3));
}
