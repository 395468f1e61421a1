// Random HDF5 files against open_reader: shapes (empty too), types (unsupported ones too), layouts,
// labels of the wrong length or type, offsets that decrease or run past the tokens. Each file's
// verdict is known when it is written: a bad file must be refused as bad data (exit 1) by every
// engine; a good one must be accepted, except by direct/mmap where its data is chunked, which they
// refuse as a usage error (exit 2). Refusals are one agreed line; accepted files read every row.
#include <hdf5.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "mpi/mpi_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/io/batch_reader.hpp"

using namespace strider;
using strider::testing::world;

namespace {

int fuzz_cases(int fallback) {
  const char* text = std::getenv("STRIDER_FUZZ_CASES");
  return text ? std::max(1, std::atoi(text) / 20) : fallback;
}

void write_dataset(hid_t file, const char* name, hid_t type, const std::vector<hsize_t>& shape, bool chunked,
                   std::mt19937_64& random, const std::vector<std::int64_t>* values = nullptr) {
  hid_t space = H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr);
  hid_t create = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t elements = 1;
  for (hsize_t extent : shape) elements *= extent;
  if (chunked && elements > 0) {
    std::vector<hsize_t> chunk(shape);
    chunk[0] = std::max<hsize_t>(1, shape[0] / 2);
    H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data());
    if (random() % 2) H5Pset_deflate(create, 1);
  }
  hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, create, H5P_DEFAULT);
  if (elements > 0) {
    std::vector<std::int64_t> data(elements);
    for (hsize_t i = 0; i < elements; ++i) data[i] = values ? (*values)[i] : static_cast<std::int64_t>(random() % 5);
    H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  }
  H5Dclose(dataset);
  H5Pclose(create);
  H5Sclose(space);
}

struct Expectation {
  bool must_fail = false;     // a known-bad file
  bool raw_readable = true;   // its data can be read by pread (contiguous): direct and mmap accept it
  std::int64_t samples = -1;  // N when accepted
  bool sequences = false;
  std::string why;  // rank 0: what makes it bad
};

/// Rank 0 writes a random file; returns what a correct reader must conclude.
Expectation write_random_file(const std::string& path, std::mt19937_64& random) {
  Expectation expect;
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const bool chunked = random() % 2;
  const hsize_t n = random() % 6;  // 0: an empty dataset
  expect.samples = static_cast<std::int64_t>(n);

  const hid_t types[] = {H5T_NATIVE_INT8,  H5T_NATIVE_UINT16, H5T_NATIVE_INT32,
                         H5T_NATIVE_INT64, H5T_NATIVE_FLOAT,  H5T_NATIVE_DOUBLE};
  if (random() % 2) {  // fixed-size samples
    std::vector<hsize_t> shape = {n};
    for (int d = 0, extra = static_cast<int>(random() % 3); d < extra; ++d) shape.push_back(1 + random() % 3);
    hid_t type = types[random() % 6];
    hid_t string_type = -1;
    if (random() % 8 == 0) {  // an unsupported element type: fixed strings
      string_type = H5Tcopy(H5T_C_S1);
      H5Tset_size(string_type, 4);
      type = string_type;
      expect.must_fail = true, expect.why += "string type; ";
    }
    if (string_type >= 0) {
      hid_t space = H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr);
      hid_t dataset = H5Dcreate2(file, "/samples", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dclose(dataset);
      H5Sclose(space);
      H5Tclose(string_type);
    } else {
      write_dataset(file, "/samples", type, shape, chunked, random);
    }
    expect.raw_readable = !chunked || n == 0;  // write_dataset chunks only a non-empty dataset
  } else {                                     // sequences
    expect.sequences = true;
    std::vector<std::int64_t> offsets = {0};
    for (hsize_t i = 0; i < n; ++i) offsets.push_back(offsets.back() + static_cast<std::int64_t>(random() % 4));
    const std::int64_t tokens = offsets.back();
    const int damage = static_cast<int>(random() % 5);
    if (damage == 1 && n >= 2) {  // decreasing
      std::swap(offsets[1], offsets[2]);
      if (offsets[1] > offsets[2]) expect.must_fail = true, expect.why += "decreasing offsets; ";
    } else if (damage == 2) {  // past the end of the tokens
      offsets.back() += 3;
      expect.must_fail = true, expect.why += "offsets past the tokens; ";
    } else if (damage == 3) {  // the wrong length
      offsets.push_back(offsets.back());
      expect.samples = static_cast<std::int64_t>(n) + 1;
    }
    write_dataset(file, "/tokens", types[random() % 4], {static_cast<hsize_t>(std::max<std::int64_t>(tokens, 1))},
                  chunked, random);
    expect.raw_readable = !chunked;  // the tokens are never empty
    write_dataset(file, "/offsets", H5T_NATIVE_INT64, {offsets.size()}, false, random, &offsets);
  }
  if (expect.samples == 0) expect.must_fail = true, expect.why += "empty; ";
  const int labels = static_cast<int>(random() % 4);  // 0: none, 1: right, 2: wrong length, 3: floats
  if (labels == 1)
    write_dataset(file, "/labels", H5T_NATIVE_INT32, {static_cast<hsize_t>(std::max<std::int64_t>(expect.samples, 0))},
                  chunked, random);
  if (labels == 2) {
    write_dataset(file, "/labels", H5T_NATIVE_INT32, {static_cast<hsize_t>(expect.samples + 1)}, chunked, random);
    expect.must_fail = true, expect.why += "labels of another length; ";
  }
  if (labels == 3) {
    write_dataset(file, "/labels", H5T_NATIVE_FLOAT, {static_cast<hsize_t>(std::max<std::int64_t>(expect.samples, 0))},
                  chunked, random);
    expect.must_fail = true, expect.why += "float labels; ";  // labels must be integers
  }
  H5Fclose(file);
  return expect;
}

}  // namespace

TEST_CASE("fuzz: dataset validation and reads", "[fuzz]") {
  const Communicator& comm = world();
  std::string path = comm.is_root() ? "/tmp/strider_fuzz_" + std::to_string(getpid()) + ".h5" : "";
  comm.broadcast(path);
  std::mt19937_64 random(777);
  int wrong = 0, accepted = 0, refused = 0;
  const std::vector<std::string> engines = {"auto", "hdf5", "direct", "mmap"};
  for (int round = 0; round < fuzz_cases(150); ++round) {
    Expectation expect;
    std::int64_t flags[4] = {0, 0, 0, 0};
    if (comm.is_root()) {
      expect = write_random_file(path, random);
      flags[0] = expect.must_fail, flags[1] = expect.samples, flags[2] = expect.sequences,
      flags[3] = expect.raw_readable;
    }
    comm.broadcast(flags, 4);
    expect.must_fail = flags[0] != 0;
    expect.samples = flags[1];
    expect.raw_readable = flags[3] != 0;
    ReaderOptions options;
    options.engine = engines[static_cast<std::size_t>(round) % engines.size()];
    // A good file that this engine cannot read: direct and mmap refuse chunked data (a usage error).
    const bool engine_refuses = !expect.raw_readable && (options.engine == "direct" || options.engine == "mmap");
    const std::string file_text =
        expect.must_fail ? "a known-bad file (" + expect.why.substr(0, expect.why.size() - 2) + ")" : "a good file";
    try {
      auto reader = open_reader(comm, path, options);
      ++accepted;
      if (expect.must_fail || engine_refuses) {
        ++wrong;
        UNSCOPED_INFO("round " << round << ", engine " << options.engine << ": " << file_text << " was accepted"
                               << (engine_refuses ? " although its data is chunked" : ""));
      }
      // Every row reads, with every engine that accepted the file; batch sizes and labels agree.
      std::vector<std::int64_t> indices;
      for (std::int64_t i = reader->info().num_samples - 1; i >= 0; --i) indices.push_back(i);
      const auto count = static_cast<std::int64_t>(indices.size());
      std::vector<std::byte> samples(static_cast<std::size_t>(reader->samples_bytes(indices.data(), count)) + 8);
      std::vector<std::int32_t> labels(indices.size());
      std::vector<std::int64_t> offsets(indices.size() + 1);
      reader->read(indices.data(), count,
                   BatchDestination{samples.data(), static_cast<std::int64_t>(samples.size()), labels.data(),
                                    reader->info().variable_length ? offsets.data() : nullptr});
      if (reader->info().num_samples != expect.samples) ++wrong;
    } catch (const AgreedError& error) {
      ++refused;
      if (std::string(error.what()).find('\n') != std::string::npos) ++wrong;
      // Bad data is refused as such (exit 1) by every engine; a good file only by an engine that
      // cannot read its layout, as a usage error (exit 2).
      const int expected_exit = expect.must_fail ? 1 : engine_refuses ? 2 : 0;
      if (error.exit_code() != expected_exit) {
        ++wrong;
        UNSCOPED_INFO("round " << round << ", engine " << options.engine << ": " << file_text
                               << " was refused with exit code " << error.exit_code() << " (expected "
                               << (expected_exit == 0 ? "acceptance" : std::to_string(expected_exit))
                               << "): " << error.what());
      }
    } catch (const Error& error) {
      // A failure in read() is local; count it as wrong unless every rank agrees below.
      ++wrong;
      UNSCOPED_INFO("round " << round << ": read failed: " << error.what());
    } catch (const std::exception& error) {  // std::bad_alloc, std::length_error, ...: still reach the barrier
      ++wrong;
      UNSCOPED_INFO("round " << round << ": " << error.what());
    } catch (...) {
      ++wrong;
      UNSCOPED_INFO("round " << round << ": an exception that is not a std::exception");
    }
    // Agree before the next round (and before asserting) so that no rank is left in a collective.
    comm.barrier();
  }
  const int total_wrong = comm.all_reduce(wrong, ReduceOp::sum);
  if (comm.is_root()) std::remove(path.c_str());
  REQUIRE(total_wrong == 0);
  CHECK(accepted > 0);
  CHECK(refused > 0);
}
