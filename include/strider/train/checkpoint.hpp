#pragma once
/// \file
/// Checkpoints: a container of named text fields and named float arrays, written atomically and read
/// back with a check of every byte.
///
/// File format (little-endian):
///   "STRIDERCKPT1"                 12 bytes, the magic
///   payload length                 uint64
///   payload                        fields then arrays:
///     field count (uint64), then per field: name length (uint64), name, value length (uint64), value
///     array count (uint64), then per array: name length (uint64), name, element count (uint64), floats
///   checksum                       uint64, FNV-1a 64 over the payload
///
/// Writing goes to PATH.tmp.<pid> in the same directory, is flushed and fsync'ed, renamed over PATH,
/// and the directory is fsync'ed: a crash at any point leaves either the previous checkpoint or the
/// new one, never a mix. Not collective: one rank (rank 0) writes; every rank may read.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/device/backend.hpp"

namespace strider {

/// Everything a resumed run needs, by name. Fields hold text (the sampler state line, epoch, step,
/// seed, class weights, the dataset fingerprint, the config, ...); arrays hold floats (parameters,
/// optimizer state).
struct Checkpoint {
  std::map<std::string, std::string> fields;
  std::map<std::string, std::vector<float>> arrays;

  /// The field `name`; throws DataError "checkpoint lacks field NAME" when absent.
  const std::string& field(const std::string& name) const;
  /// The array `name`; throws DataError "checkpoint lacks array NAME" when absent.
  const std::vector<float>& array(const std::string& name) const;
};

/// Raised by read_checkpoint when the file does not exist (a DataError, so a caller that does not
/// care still gets a clear message). `--resume` catches it (or asks checkpoint_exists) to start fresh.
class CheckpointNotFound : public DataError {
 public:
  using DataError::DataError;
};

/// Whether a regular file exists at path (a leftover PATH.tmp.* does not count). Not collective.
bool checkpoint_exists(const std::string& path);

/// Writes the checkpoint atomically (see the file comment). Throws SystemError naming the path and
/// the failing call (errno in the code) and removes the temporary file; PATH is then unchanged.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint);

/// Reads and verifies a checkpoint. Throws CheckpointNotFound when the file is missing, DataError with
/// one line otherwise: "checkpoint X is not a strider checkpoint (bad magic)", "checkpoint X is
/// truncated (expected N bytes, found M)", "checkpoint X is corrupted (checksum mismatch)",
/// "checkpoint X is corrupted (...)" for a malformed payload; SystemError when it cannot be read.
Checkpoint read_checkpoint(const std::string& path);

/// Stores the backend's model into the checkpoint: field "model.config" (model_config_text), arrays
/// "model.parameters" and "optimizer.velocity"; with normalized inputs also field
/// "input.normalization" (the statistics layout) and arrays "input.mean" and "input.stddev". Not
/// collective.
void save_model(const Backend& backend, Checkpoint& checkpoint);

/// Restores what save_model stored into an initialized backend, the input statistics included (the
/// backend is initialized again with the recorded ones). Throws DataError when the checkpoint's
/// model config differs from the backend's ("checkpoint model (kind=...) does not match this run
/// (kind=...)"), one normalizes its inputs and the other does not, or an array has the wrong
/// length. Not collective.
void load_model(const Checkpoint& checkpoint, Backend& backend);

}  // namespace strider
