// A NaN or infinite training loss stops train() on every rank with one agreed error, at 1..4 ranks,
// on the CPU backend: once for a file holding a NaN sample, once for a learning rate that diverges.
// Collective-safe: each rank records what it caught, the ranks agree, then every rank asserts.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "mpi_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/io/hdf5_handle.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/train/trainer.hpp"

using namespace strider;
using strider::testing::world;

namespace {

bool on_all_ranks(bool local) {
  return world().all_reduce(local ? 1 : 0, ReduceOp::min) == 1;
}

/// A generated features file of 400 rows x 8 float32 in a folder rank 0 made; `nan_row` >= 0 sets
/// feature 3 of that row to NaN (rank 0 patches the file after the collective write).
std::string features_file(const std::string& name, std::int64_t nan_row) {
  std::string folder;
  if (world().is_root()) {
    char pattern[] = "/tmp/strider_divergence_XXXXXX";
    folder = mkdtemp(pattern) ? pattern : "/tmp";
  }
  world().broadcast(folder);
  const std::string path = folder + "/" + name + ".h5";
  SyntheticOptions options;
  options.samples = 400;
  options.classes = 3;
  options.dim = 8;
  options.seed = 5;
  options.progress = false;
  write_synthetic_dataset(world(), path, options);
  world().collective_try([&] {
    if (!world().is_root() || nan_row < 0) return;
    H5File file(STRIDER_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), path));
    H5Dataset samples(STRIDER_H5_CHECK(H5Dopen2(file.get(), "/samples", H5P_DEFAULT), path));
    H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(samples.get()), path));
    const hsize_t start[2] = {static_cast<hsize_t>(nan_row), 3};
    const hsize_t count[2] = {1, 1};
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), path);
    H5Dataspace one(STRIDER_H5_CHECK(H5Screate_simple(2, count, nullptr), path));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    STRIDER_H5_CHECK(H5Dwrite(samples.get(), H5T_NATIVE_FLOAT, one.get(), space.get(), H5P_DEFAULT, &nan), path);
  });
  return path;
}

void remove_file_and_folder(const std::string& path) {
  world().barrier();
  if (!world().is_root()) return;
  std::remove(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

TrainerConfig cpu_config(const std::string& path) {
  TrainerConfig config;
  config.loader.data_path = path;
  config.backend = "cpu";
  config.loader.seed = 9;
  config.epochs = 2;
  config.loader.sampler.batch_size = 16;
  config.model.kind = "mlp";
  config.step_timeout_seconds = 0;
  return config;
}

/// Runs train() and returns the AgreedError's message ("" when it did not throw one).
std::string agreed_failure(const TrainerConfig& config) {
  try {
    train(world(), config);
  } catch (const AgreedError& error) {
    return error.reason();
  }
  return "";
}

}  // namespace

TEST_CASE("a NaN in the data stops training on every rank with one agreed error", "[divergence]") {
  const std::string path = features_file("nan", 123);
  const std::string message = agreed_failure(cpu_config(path));
  INFO("rank " << world().rank() << ": " << message);
  CHECK(on_all_ranks(message.find("the training loss is NaN or infinite at epoch 0 step") != std::string::npos));
  CHECK(on_all_ranks(message.find("the data holds NaN or infinite values") != std::string::npos));
  // The same words on every rank: one agreed error, not one per rank.
  std::string root_message = message;
  world().broadcast(root_message);
  CHECK(on_all_ranks(root_message == message));
  remove_file_and_folder(path);
}

TEST_CASE("a learning rate that diverges stops training with the same error, and a sane one does not", "[divergence]") {
  const std::string path = features_file("lr", -1);
  TrainerConfig diverging = cpu_config(path);
  diverging.learning_rate = 1e30f;
  const std::string message = agreed_failure(diverging);
  INFO("rank " << world().rank() << ": " << message);
  CHECK(on_all_ranks(message.find("the training loss is NaN or infinite") != std::string::npos &&
                     message.find("try a lower TrainerConfig::learning_rate") != std::string::npos));
  TrainerConfig sane = cpu_config(path);
  sane.learning_rate = 0.05f;
  sane.epochs = 1;
  bool finished = false;
  try {
    const TrainSummary summary = train(world(), sane);
    finished = summary.epochs.size() == 1 && std::isfinite(summary.epochs[0].loss);
  } catch (const std::exception&) {
  }
  CHECK(on_all_ranks(finished));
  remove_file_and_folder(path);
}
