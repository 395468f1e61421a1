// strider-gen: writes a synthetic dataset in strider's format, in parallel (mpirun -np R ...): each
// rank writes its own rows collectively; the file is the same whatever R is, for one --seed.

#include <chrono>
#include <iomanip>
#include <sstream>

#include "common/cli.hpp"
#include "strider/bench/workload_preset.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/io/synthetic_dataset.hpp"

namespace {

constexpr const char* usage =
    "usage: [mpirun -np R] strider-gen --out FILE [--kind features|images|sequences|records] [--samples N | "
    "--class-counts A,B,...]\n"
    "Writes a synthetic dataset: features (Gaussian class clusters of --dim float32 or float16), images (uint8 [N, C, "
    "H, W]),\n"
    "sequences (int32 tokens + int64 offsets, log-normal lengths, tokens that predict the label) or records (uint8\n"
    "[N, --record-bytes] of pseudo-random bytes), with int32 labels written in class blocks. --workload W writes\n"
    "records of that MLPerf-Storage workload's sample size, 4 KiB-aligned for O_DIRECT. Deterministic from --seed\n"
    "whatever the number of ranks.";

/// --workload: records of the preset's sample size, aligned for O_DIRECT, unless given otherwise.
void apply_workload(const std::string& name, const strider::cli::po::variables_map& values,
                    strider::SyntheticOptions& options) {
  using namespace strider;
  const WorkloadPreset& preset = workload_preset(name);
  if (!values["kind"].defaulted() && options.kind != "records")
    STRIDER_THROW(UsageError, "--workload writes records, not --kind " + options.kind);
  if (values["samples"].defaulted() && !values.count("class-counts"))
    STRIDER_THROW(UsageError, "--workload " + name + " writes " + std::to_string(preset.sample_bytes) +
                                  " bytes per sample: give --samples (or --class-counts)");
  options.kind = "records";
  if (values["record-bytes"].defaulted()) options.record_bytes = preset.sample_bytes;
  if (values["align"].defaulted()) options.alignment_bytes = kDirectIoAlignmentBytes;
}

int gen_main(strider::Communicator& world, int argc, char** argv) {
  using namespace strider;
  namespace po = cli::po;
  SyntheticOptions options;
  std::string out, class_counts, workload;
  const std::vector<std::string> args = cli::arguments_every_rank_shares(world, argc, argv, 1);
  const cli::Parsed parsed = world.collective_try([&] {
    po::options_description dataset("Dataset");
    dataset.add_options()("kind", po::value<std::string>(&options.kind)->default_value(options.kind),
                          "features | images | sequences | records")(
        "workload", po::value<std::string>(&workload),
        ("records of an MLPerf-Storage workload's samples: " + workload_preset_names() +
         " (sets --kind records, --record-bytes, --align 4096)")
            .c_str())("samples", po::value<std::int64_t>(&options.samples)->default_value(options.samples),
                      "N, with --classes")(
        "classes", po::value<std::int64_t>(&options.classes)->default_value(options.classes), "K classes")(
        "imbalance", po::value<double>(&options.imbalance)->default_value(options.imbalance),
        "largest / smallest class count (1: balanced); counts fall geometrically from class 0")(
        "class-counts", po::value<std::string>(&class_counts),
        "rows per class, e.g. 10000,200,50 (overrides --samples/--classes)")(
        "seed", po::value<std::int64_t>(&options.seed)->default_value(options.seed), "the seed");
    po::options_description samples("Samples, per kind");
    samples.add_options()("dim", po::value<std::int64_t>(&options.dim)->default_value(options.dim),
                          "features: floats per sample")(
        "dtype", po::value<std::string>(&options.dtype)->default_value(options.dtype),
        "features: float32 | float16 (IEEE binary16, as h5py writes np.float16)")(
        "noise", po::value<double>(&options.noise)->default_value(options.noise),
        "features: noise around the class centres")(
        "channels", po::value<std::int64_t>(&options.channels)->default_value(options.channels), "images: C")(
        "height", po::value<std::int64_t>(&options.height)->default_value(options.height), "images: H")(
        "width", po::value<std::int64_t>(&options.width)->default_value(options.width), "images: W")(
        "min-len", po::value<std::int64_t>(&options.min_length)->default_value(options.min_length),
        "sequences: shortest")("max-len",
                               po::value<std::int64_t>(&options.max_length)->default_value(options.max_length),
                               "sequences: longest")(
        "median-len", po::value<std::int64_t>(&options.median_length)->default_value(options.median_length),
        "sequences: median length")("vocab", po::value<std::int64_t>(&options.vocab)->default_value(options.vocab),
                                    "sequences: tokens in [0, vocab)")(
        "record-bytes", po::value<std::int64_t>(&options.record_bytes)->default_value(options.record_bytes),
        "records: bytes per sample");
    po::options_description output("Output");
    output.add_options()("out", po::value<std::string>(&out)->required(), "the file to write (truncated if it exists)")(
        "align", po::value<std::int64_t>(&options.alignment_bytes)->default_value(options.alignment_bytes),
        "datasets of at least this many bytes start at a multiple of it (4096: rows aligned for --odirect); 0: "
        "HDF5's layout")("layout", po::value<std::string>(&options.layout)->default_value(options.layout),
                         "contiguous | chunked")("chunk-rows",
                                                 po::value<std::int64_t>(&options.chunk_rows)->default_value(0),
                                                 "chunked: rows (sequences: tokens) per chunk; 0: about 64 KiB")(
        "compress", po::value<int>(&options.compression)->default_value(0),
        "deflate level 1..9 (implies chunked); 0: none")("no-progress", po::bool_switch(), "no progress lines");
    cli::SharedOptions shared;
    shared.add(output, {"data-key", "label-key", "tokens-key", "offsets-key"});
    po::options_description description;
    description.add(dataset).add(samples).add(output);
    cli::Parsed result = cli::parse(args, description, usage);
    if (!result.help) {
      LoaderOptions names;
      shared.apply(result.values, names);
      options.keys = names.reader.keys;
    }
    if (!result.help && !class_counts.empty()) options.class_counts = parse_integer_list(class_counts, "class-counts");
    if (!result.help && !workload.empty()) apply_workload(workload, result.values, options);
    options.progress = !(result.values.count("no-progress") && result.values["no-progress"].as<bool>());
    return result;
  });
  if (parsed.help) return 0;

  const auto start = std::chrono::steady_clock::now();
  const SyntheticSummary summary = write_synthetic_dataset(world, out, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream line;
  line << "wrote " << out << ": " << summary.samples << " " << options.kind << " samples";
  if (options.kind == "sequences") line << " (" << summary.tokens << " tokens)";
  line << ", " << summary.class_counts.size() << " classes, "
       << (options.compression > 0 ? "chunked+deflate" : options.layout) << ", " << std::fixed << std::setprecision(1)
       << static_cast<double>(summary.bytes) / 1e6 << " MB in " << std::setprecision(2) << seconds << " s on "
       << world.size() << " rank" << (world.size() > 1 ? "s" : "");
  print_on_root(line.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) { return gen_main(world, argc, argv); });
}
