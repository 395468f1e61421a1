#include "subcommands.hpp"

namespace strider::inspect {

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> all = {
      {"plan", run_plan},   {"info", run_info},           {"dump", run_dump}, {"read-speed", run_read_speed},
      {"stats", run_stats}, {"workloads", run_workloads},
  };
  return all;
}

}  // namespace strider::inspect
