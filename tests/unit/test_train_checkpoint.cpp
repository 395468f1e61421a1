// Checkpoint files (round trip, truncation, corruption, interrupted writes, a missing file), saving
// and restoring a model, and the dataset fingerprint.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "strider/core/error.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/train/checkpoint.hpp"
#include "strider/train/fingerprint.hpp"

using namespace strider;

namespace {

/// A fresh directory under /tmp, removed (with its files) at scope exit.
struct TemporaryDirectory {
  std::string path;
  TemporaryDirectory() {
    char name[] = "/tmp/strider_ckpt_XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TemporaryDirectory() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

Checkpoint sample_checkpoint() {
  Checkpoint checkpoint;
  checkpoint.fields["sampler.state"] = "mode=balanced epoch=3 step=17 seed=42";
  checkpoint.fields["epoch"] = "3";
  checkpoint.fields["empty"] = "";
  checkpoint.fields["binary"] = std::string("a\0b\nc", 5);
  checkpoint.arrays["model.parameters"] = {1.5f, -2.0f, 0.0f, 3.25e-8f};
  checkpoint.arrays["none"] = {};
  return checkpoint;
}

std::string error_reason(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const CheckpointNotFound& error) {
    return "not found: " + error.reason();
  } catch (const DataError& error) {
    return error.reason();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a checkpoint round-trips every field and array", "[train][checkpoint]") {
  TemporaryDirectory directory;
  const std::string path = directory.path + "/run.ckpt";
  REQUIRE_FALSE(checkpoint_exists(path));
  const Checkpoint written = sample_checkpoint();
  write_checkpoint(path, written);
  REQUIRE(checkpoint_exists(path));
  const Checkpoint read = read_checkpoint(path);
  REQUIRE(read.fields == written.fields);
  REQUIRE(read.arrays == written.arrays);
  REQUIRE(read.field("epoch") == "3");
  REQUIRE(read.array("model.parameters").size() == 4);
  REQUIRE_THROWS_AS(read.field("step"), DataError);
  REQUIRE_THROWS_AS(read.array("velocity"), DataError);
  // The magic leads the file; no temporary file is left.
  REQUIRE(read_bytes(path).compare(0, 12, "STRIDERCKPT1") == 0);
  REQUIRE_FALSE(checkpoint_exists(path + ".tmp." + std::to_string(getpid())));

  // Overwriting replaces the whole content.
  Checkpoint smaller;
  smaller.fields["epoch"] = "4";
  write_checkpoint(path, smaller);
  REQUIRE(read_checkpoint(path).fields == smaller.fields);
  REQUIRE(read_checkpoint(path).arrays.empty());
}

TEST_CASE("truncated, corrupted and foreign checkpoints are refused with one clear line", "[train][checkpoint]") {
  TemporaryDirectory directory;
  const std::string path = directory.path + "/run.ckpt";
  write_checkpoint(path, sample_checkpoint());
  const std::string good = read_bytes(path);
  const std::string expected = std::to_string(good.size());

  for (std::size_t keep : {good.size() - 1, good.size() - 8, std::size_t{40}, std::size_t{20}}) {
    write_bytes(path, good.substr(0, keep));
    REQUIRE(error_reason(path) == "checkpoint " + path + " is truncated (expected " + expected + " bytes, found " +
                                      std::to_string(keep) + ")");
  }
  write_bytes(path, good.substr(0, 5));
  REQUIRE(error_reason(path) == "checkpoint " + path + " is truncated (expected at least 28 bytes, found 5)");

  // A flipped byte anywhere in the payload or the checksum.
  for (std::size_t position : {std::size_t{20}, good.size() / 2, good.size() - 9, good.size() - 1}) {
    std::string flipped = good;
    flipped[position] = static_cast<char>(flipped[position] ^ 0x10);
    write_bytes(path, flipped);
    REQUIRE(error_reason(path) == "checkpoint " + path + " is corrupted (checksum mismatch)");
  }
  write_bytes(path, good + "x");
  REQUIRE(error_reason(path) == "checkpoint " + path + " is corrupted (1 bytes after the checksum)");
  write_bytes(path, "PK\x03\x04 not a checkpoint at all, but long enough");
  REQUIRE(error_reason(path) == "checkpoint " + path + " is not a strider checkpoint (bad magic)");

  REQUIRE(error_reason(directory.path + "/missing.ckpt") ==
          "not found: checkpoint " + directory.path + "/missing.ckpt does not exist");
  REQUIRE_FALSE(checkpoint_exists(directory.path));  // a directory is no checkpoint
}

TEST_CASE("an interrupted write leaves the previous checkpoint readable", "[train][checkpoint]") {
  TemporaryDirectory directory;
  const std::string path = directory.path + "/run.ckpt";
  const Checkpoint previous = sample_checkpoint();
  write_checkpoint(path, previous);
  // A write killed before its rename leaves a partial PATH.tmp.<pid>: reading ignores it, and the next
  // write (same pid or another) replaces it.
  const std::string good = read_bytes(path);
  write_bytes(path + ".tmp.12345", good.substr(0, good.size() / 2));
  write_bytes(path + ".tmp." + std::to_string(getpid()), "garbage");
  REQUIRE(read_checkpoint(path).fields == previous.fields);
  Checkpoint next;
  next.fields["epoch"] = "5";
  write_checkpoint(path, next);
  REQUIRE(read_checkpoint(path).fields == next.fields);
  REQUIRE_FALSE(checkpoint_exists(path + ".tmp." + std::to_string(getpid())));

  // A write that cannot happen (the directory is gone) throws and leaves nothing behind.
  REQUIRE_THROWS_AS(write_checkpoint(directory.path + "/no/such/dir/run.ckpt", next), SystemError);
}

TEST_CASE("save_model and load_model restore the model and refuse another model", "[train][checkpoint]") {
  ModelConfig config;
  config.kind = "softmax";
  config.features = 3;
  config.num_classes = 2;
  config.seed = 4;
  CpuBackend trained;
  trained.initialize(config);
  const std::vector<float> samples = {1, 2, 3};
  const std::vector<std::int32_t> labels = {1};
  trained.forward_backward(BatchInput{reinterpret_cast<const std::byte*>(samples.data()), ElementType::float32, 1, 3,
                                      labels.data(), nullptr});
  trained.apply_sgd(0.1f, 0.9f);
  Checkpoint checkpoint;
  save_model(trained, checkpoint);

  TemporaryDirectory directory;
  write_checkpoint(directory.path + "/m.ckpt", checkpoint);
  CpuBackend restored;
  restored.initialize(config);
  load_model(read_checkpoint(directory.path + "/m.ckpt"), restored);
  REQUIRE(restored.parameters() == trained.parameters());
  REQUIRE(restored.optimizer_state() == trained.optimizer_state());

  config.hidden = 5;
  config.kind = "mlp";
  CpuBackend other;
  other.initialize(config);
  try {
    load_model(checkpoint, other);
    FAIL("no error");
  } catch (const DataError& error) {
    REQUIRE(error.reason() ==
            "checkpoint model (kind=softmax features=3 hidden=64 num_classes=2 vocab=0 embed_dim=32 seed=4) does not "
            "match this run (kind=mlp features=3 hidden=5 num_classes=2 vocab=0 embed_dim=32 seed=4)");
  }
  checkpoint.arrays["model.parameters"].pop_back();
  REQUIRE_THROWS_AS(load_model(checkpoint, restored), DataError);
}

TEST_CASE("normalized inputs: the checkpoint records the statistics and a resume uses them", "[train][checkpoint]") {
  ModelConfig config;
  config.kind = "softmax";
  config.features = 4;
  config.num_classes = 2;
  config.normalization = Normalization{StatisticsLayout::channels_last, {10.0f, -2.5f}, {3.0f, 0.25f}};
  CpuBackend trained;
  trained.initialize(config);
  Checkpoint checkpoint;
  save_model(trained, checkpoint);
  TemporaryDirectory directory;
  write_checkpoint(directory.path + "/n.ckpt", checkpoint);

  // This run computed other statistics (another rank count): the recorded ones win.
  ModelConfig resumed = config;
  resumed.normalization = Normalization{StatisticsLayout::channels_last, {10.000001f, -2.5f}, {3.0f, 0.2500001f}};
  CpuBackend restored;
  restored.initialize(resumed);
  load_model(read_checkpoint(directory.path + "/n.ckpt"), restored);
  REQUIRE(restored.config().normalization.has_value());
  CHECK(restored.config().normalization->layout == StatisticsLayout::channels_last);
  CHECK(restored.config().normalization->mean == std::vector<float>{10.0f, -2.5f});
  CHECK(restored.config().normalization->stddev == std::vector<float>{3.0f, 0.25f});
  REQUIRE(restored.parameters() == trained.parameters());
  // The normalized model reads (x - mean) / stddev: inputs equal to the means give the bias only.
  const std::vector<float> at_means = {10.0f, -2.5f, 10.0f, -2.5f};
  std::int32_t prediction = -1;
  restored.predict(
      BatchInput{reinterpret_cast<const std::byte*>(at_means.data()), ElementType::float32, 1, 4, nullptr, nullptr},
      &prediction);
  CHECK(prediction == 0);  // initial biases are zero: argmax of equal logits is the first class

  // A run without normalization cannot resume it, nor the other way round.
  ModelConfig plain = config;
  plain.normalization.reset();
  CpuBackend unnormalized;
  unnormalized.initialize(plain);
  try {
    load_model(checkpoint, unnormalized);
    FAIL("no error");
  } catch (const DataError& error) {
    REQUIRE(error.reason() ==
            "the checkpoint was trained on normalized inputs, this run asks for unnormalized ones (pass the "
            "--normalize it was trained with)");
  }
  Checkpoint without;
  save_model(unnormalized, without);
  REQUIRE_THROWS_AS(load_model(without, restored), DataError);
}

namespace {
/// The values as a view that owns them (what the fingerprint takes).
template <typename T>
SharedView<T> shared(std::vector<T> values) {
  return std::make_shared<const std::vector<T>>(std::move(values));
}
}  // namespace

TEST_CASE("the dataset fingerprint follows the data, not the path", "[train][checkpoint]") {
  DatasetInfo info;
  info.path = "/scratch/a/train.h5";
  info.num_samples = 4;
  info.sample_shape = {8};
  info.has_labels = true;
  info.layout = "contiguous";
  const std::vector<std::int32_t> labels = {0, 1, 1, 0};
  const DatasetKeys keys;
  const std::uint64_t base = dataset_fingerprint(info, shared(labels), {}, keys);

  DatasetInfo moved = info;
  moved.path = "/local/ssd/copy.h5";
  moved.layout = "chunked";  // restaged with another layout: the same data
  moved.chunk_shape = {2, 8};
  REQUIRE(dataset_fingerprint(moved, shared(labels), {}, keys) == base);

  REQUIRE(dataset_fingerprint(info, shared<std::int32_t>({0, 1, 1, 1}), {}, keys) != base);
  DatasetInfo reshaped = info;
  reshaped.sample_shape = {2, 4};
  REQUIRE(dataset_fingerprint(reshaped, shared(labels), {}, keys) != base);
  DatasetInfo retyped = info;
  retyped.element_type = ElementType::float64;
  REQUIRE(dataset_fingerprint(retyped, shared(labels), {}, keys) != base);
  DatasetKeys renamed = keys;
  renamed.data = "/features";
  REQUIRE(dataset_fingerprint(info, shared(labels), {}, renamed) != base);
  renamed = keys;
  renamed.tokens = "/ids";  // not read for fixed-size samples
  REQUIRE(dataset_fingerprint(info, shared(labels), {}, renamed) == base);

  DatasetInfo sequences;
  sequences.variable_length = true;
  sequences.num_samples = 3;
  sequences.num_tokens = 9;
  sequences.element_type = ElementType::int32;
  const std::uint64_t sequence_base = dataset_fingerprint(sequences, {}, shared<std::int64_t>({2, 3, 4}), keys);
  REQUIRE(dataset_fingerprint(sequences, {}, shared<std::int64_t>({3, 2, 4}), keys) != sequence_base);
  REQUIRE(fingerprint_hex(0x0123456789abcdefULL) == "0123456789abcdef");
  REQUIRE(fingerprint_hex(base).size() == 16);
}

TEST_CASE("the fingerprint streams labels in chunks: every chunk counts, and the largest label is found",
          "[train][checkpoint]") {
  DatasetInfo info;
  info.num_samples = 2'500'000;  // three chunks of up to 2^20 labels
  info.sample_shape = {4};
  info.has_labels = true;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(info.num_samples));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 5);
  labels[2'300'000] = 9;
  labels[(1 << 20) - 1] = 11;  // the largest is the first chunk's last label
  const DatasetKeys keys;
  std::int64_t served = 0;
  std::int32_t max_label = -1;
  const std::uint64_t streamed = dataset_fingerprint(
      info, info.num_samples,
      [&](std::int64_t first, std::int64_t count, std::int32_t* out) {
        REQUIRE(first == served);  // in order, no gaps
        std::copy(labels.begin() + first, labels.begin() + first + count, out);
        served += count;
      },
      {}, keys, &max_label);
  REQUIRE(served == info.num_samples);
  REQUIRE(max_label == 11);
  REQUIRE(streamed == dataset_fingerprint(info, shared(labels), {}, keys));
  labels[2'400'000] = 1;  // in the last chunk
  REQUIRE(dataset_fingerprint(info, shared(labels), {}, keys) != streamed);
}
