// make_device_batches: which device each choice takes on this machine and why, the options it
// refuses before anything is made (the same decision on every rank), and a file's images through
// the Loader into device batches the way a trainer's loop takes them.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <optional>

#include "mpi_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/device/device_batches.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/train/batch_input.hpp"

using namespace strider;
using strider::testing::world;

namespace {

// The message of the UsageError that `make` throws ("no UsageError" when it throws none), cut to
// `part` when it holds it: checks compare the result with `part` and show the whole message
// otherwise.
template <typename Make>
std::string usage_error(Make&& make, const std::string& part) {
  std::string message = "no UsageError";
  try {
    make();
  } catch (const UsageError& error) {
    message = error.what();
  }
  return message.find(part) != std::string::npos ? part : message;
}

}  // namespace

TEST_CASE("make_device_batches: cpu is the twin, auto follows the GPU probe", "[mpi][device-batches]") {
  std::string why;
  const auto cpu = make_device_batches("cpu", world(), {}, &why);
  REQUIRE_ON_ALL_RANKS(cpu->name() == "cpu");
  REQUIRE_ON_ALL_RANKS(cpu->device() == -1);
  REQUIRE_ON_ALL_RANKS(cpu->host_allocator()->name() == "page-aligned");
  REQUIRE_ON_ALL_RANKS(why == "cpu device batches: requested with make_device_batches choice cpu");

  const GpuProbe probe = probe_gpus();
  const auto automatic = make_device_batches("auto", world(), {}, &why);
  if (world().all_reduce(probe.device_count, ReduceOp::min) == 0) {
    REQUIRE_ON_ALL_RANKS(automatic->name() == "cpu");
    REQUIRE_ON_ALL_RANKS(why == "cpu device batches: no usable GPU (" + probe.reason + ")");
    const std::string refusal = "make_device_batches choice cuda: ";
    REQUIRE_ON_ALL_RANKS(usage_error([] { make_device_batches("cuda", world(), {}, nullptr); }, refusal) == refusal);
  } else {
    REQUIRE_ON_ALL_RANKS(automatic->name() == "cuda");
    REQUIRE_ON_ALL_RANKS(automatic->device() == world().local_rank() % probe.device_count);
    REQUIRE_ON_ALL_RANKS(automatic->host_allocator()->name() == "cuda-pinned");
    REQUIRE_ON_ALL_RANKS(why.rfind("cuda device batches: ", 0) == 0);
  }
}

TEST_CASE("make_device_batches refuses bad choices and options by name", "[mpi][device-batches][errors]") {
  const std::string bad_choice = "make_device_batches choice must be auto, cpu or cuda, got 'gpu'";
  REQUIRE_ON_ALL_RANKS(usage_error([] { make_device_batches("gpu", world(), {}, nullptr); }, bad_choice) == bad_choice);
  const std::string bad_slots = "DeviceBatchOptions::slots must be 1..64, got 65";
  REQUIRE_ON_ALL_RANKS(usage_error(
                           [] {
                             make_device_batches("cpu", world(), DeviceBatchOptions{{}, 65}, nullptr);
                           },
                           bad_slots) == bad_slots);
  DeviceBatchOptions to_integer;
  to_integer.conversion.output = ElementType::int32;
  const std::string bad_output = "convert samples to float32 or float16, not to int32";
  REQUIRE_ON_ALL_RANKS(usage_error([&] { make_device_batches("auto", world(), to_integer, nullptr); }, bad_output) ==
                       bad_output);
  DeviceBatchOptions unconverted;
  unconverted.conversion.normalization = Normalization{StatisticsLayout::per_feature, {0}, {1}};
  const std::string no_output = "normalization needs a float output type";
  REQUIRE_ON_ALL_RANKS(usage_error([&] { make_device_batches("cpu", world(), unconverted, nullptr); }, no_output) ==
                       no_output);
}

TEST_CASE("images from the file reach device batches normalized, through the Loader and its ring",
          "[mpi][device-batches]") {
  // The README's loop on the CPU twin: uint8 images [N, 3, 4, 4], channels first, mean 128 and
  // standard deviations 1, 2, 4 (every expected value is exact); a ring of 3 batches, one device
  // batch taken ahead, each Batch handed to put() as the owner of its memory; two epochs.
  const Communicator& comm = world();
  SyntheticOptions file_options;
  file_options.kind = "images";
  file_options.samples = 100;
  file_options.classes = 4;
  file_options.channels = 3;
  file_options.height = 4;
  file_options.width = 4;
  file_options.seed = 11;
  file_options.progress = false;
  std::string path = comm.is_root() ? "/tmp/strider_device_batches_" + std::to_string(getpid()) + ".h5" : "";
  comm.broadcast(path);
  write_synthetic_dataset(comm, path, file_options);
  constexpr std::int64_t samples = 100, features = 48, inner = 16;
  const float stddev[3] = {1, 2, 4};

  ReaderOptions reader_options;
  reader_options.engine = "hdf5";
  auto oracle = open_reader(comm, path, reader_options);
  std::vector<std::int64_t> all(samples);
  for (std::int64_t i = 0; i < samples; ++i) all[static_cast<std::size_t>(i)] = i;
  std::vector<std::uint8_t> pixels(samples * features);
  std::vector<std::int32_t> labels(samples);
  comm.collective_try([&] {
    oracle->read(
        all.data(), samples,
        BatchDestination{reinterpret_cast<std::byte*>(pixels.data()), samples * features, labels.data(), nullptr});
  });
  oracle.reset();

  DeviceBatchOptions options;
  options.conversion = ConversionOptions{ElementType::float32,
                                         Normalization{StatisticsLayout::channels_first, {128, 128, 128}, {1, 2, 4}}};
  const auto batches = make_device_batches("cpu", comm, options, nullptr);
  LoaderOptions loader_options;
  loader_options.data_path = path;
  loader_options.sampler.batch_size = 7;
  loader_options.seed = 4;
  loader_options.prefetch = 3;
  loader_options.allocator = batches->host_allocator();
  std::int64_t wrong = 0;
  std::vector<std::int64_t> seen(samples, 0);
  {
    Loader loader(comm, loader_options);
    comm.collective_try(
        [&] { batches->prepare(loader.dataset().element_type, features_per_sample(loader.dataset())); });
    std::vector<std::vector<std::int64_t>> rows_of_step;
    auto put = [&](std::optional<Batch> host) -> std::optional<DeviceBatch> {
      if (!host) return std::nullopt;
      rows_of_step.push_back(host->indices());
      const BatchInput view = batch_input(*host, loader.dataset());
      return batches->put(view, std::move(*host));
    };
    for (std::int64_t e = 0; e < 2; ++e) {
      LoaderEpoch epoch = loader.epoch(e);
      comm.collective_try([&] {  // a failure on one rank reaches every rank before the next epoch()
        rows_of_step.clear();
        std::optional<DeviceBatch> current = put(epoch.next());
        for (std::size_t step = 0; current; ++step) {
          std::optional<DeviceBatch> following = put(epoch.next());
          const std::vector<std::int64_t>& rows = rows_of_step[step];
          const float* values = current->data<float>();
          if (current->count() != static_cast<std::int64_t>(rows.size())) ++wrong;
          for (std::size_t r = 0; r < rows.size(); ++r) {
            const auto row = static_cast<std::size_t>(rows[r]);
            ++seen[row];
            if (current->labels()[r] != labels[row]) ++wrong;
            for (std::int64_t f = 0; f < features; ++f) {
              const float x = pixels[row * features + static_cast<std::size_t>(f)];
              if (values[static_cast<std::int64_t>(r) * features + f] != (x - 128.0f) / stddev[f / inner]) ++wrong;
            }
          }
          batches->release(*current, nullptr);
          current = following;
        }
      });
    }
    loader.close();
  }
  const std::int64_t total_wrong = comm.all_reduce(wrong, ReduceOp::sum);
  comm.all_reduce(seen.data(), samples, ReduceOp::sum);
  const auto unseen = std::count(seen.begin(), seen.end(), 0);
  comm.barrier();
  if (comm.is_root()) std::remove(path.c_str());
  REQUIRE(total_wrong == 0);  // agreed values: a plain REQUIRE
  REQUIRE(unseen == 0);       // every row, in both epochs together, on some rank
  REQUIRE_ON_ALL_RANKS(batches->held() == 0);
}
