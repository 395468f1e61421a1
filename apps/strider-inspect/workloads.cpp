// strider-inspect workloads [--json]: the MLPerf Storage workload presets that strider-gen and
// strider-bench take with --workload (DLIO's H100 configurations), one a line or as JSON. Scripts
// (bench/scripts/storage.sh) read the sizes from here rather than keeping their own copy.

#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/cli.hpp"
#include "strider/bench/workload_preset.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/json_writer.hpp"
#include "subcommands.hpp"

namespace strider::inspect {

int run_workloads(int argc, char** argv) {
  return run_app_without_mpi([&] {
    std::string json;
    cli::HelpGroups groups;
    cli::json_option(groups.output, &json, "print a JSON array");
    const cli::Parsed parsed = cli::parse(
        cli::arguments(argc, argv, 2), groups.all(),
        "usage: strider-inspect workloads [--json [PATH]]\n"
        "The MLPerf Storage workloads of strider-gen and strider-bench --workload: sample bytes (DLIO's, rounded up\n"
        "to whole 4 KiB blocks for O_DIRECT), batch per accelerator, compute seconds per step on an H100, and the\n"
        "least accelerator utilization that passes.");
    if (parsed.help) return 0;
    std::ostringstream out;
    if (!json.empty()) {
      JsonWriter writer(out);
      writer.begin_array();
      for (const WorkloadPreset& preset : workload_presets()) {
        writer.begin_object();
        writer.field("workload", preset.name);
        writer.field("sample_bytes", preset.sample_bytes);
        writer.field("dlio_sample_bytes", preset.dlio_sample_bytes);
        writer.field("batch_size", preset.batch_size);
        writer.field("compute_s", preset.compute_seconds);
        writer.field("au_threshold", preset.au_threshold);
        writer.end_object();
      }
      writer.end_array();
      out << "\n";
    } else {
      out << "workload   sample_bytes  dlio_sample_bytes  batch_size  compute_s  au_threshold\n";
      for (const WorkloadPreset& preset : workload_presets())
        out << std::left << std::setw(10) << preset.name << std::right << std::setw(13) << preset.sample_bytes
            << std::setw(19) << preset.dlio_sample_bytes << std::setw(12) << preset.batch_size << std::setw(11)
            << preset.compute_seconds << std::setw(14) << preset.au_threshold << "\n";
    }
    cli::write_report(json, out.str());
    return 0;
  });
}

}  // namespace strider::inspect
