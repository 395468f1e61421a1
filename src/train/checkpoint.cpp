// Checkpoint files: serialisation, atomic replacement (tmp file, fsync, rename, fsync of the
// directory) and verification on read.
#include "strider/train/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/test_hooks.hpp"
#include "strider/core/hash.hpp"

namespace strider {
namespace {

constexpr char magic[] = "STRIDERCKPT1";
constexpr std::size_t magic_bytes = sizeof(magic) - 1;
constexpr std::size_t header_bytes = magic_bytes + sizeof(std::uint64_t);
constexpr std::size_t trailer_bytes = sizeof(std::uint64_t);

void append_u64(std::string& out, std::uint64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
void append_text(std::string& out, const std::string& text) {
  append_u64(out, text.size());
  out.append(text);
}

std::string serialize_payload(const Checkpoint& checkpoint) {
  std::string payload;
  append_u64(payload, checkpoint.fields.size());
  for (const auto& [name, value] : checkpoint.fields) {
    append_text(payload, name);
    append_text(payload, value);
  }
  append_u64(payload, checkpoint.arrays.size());
  for (const auto& [name, values] : checkpoint.arrays) {
    append_text(payload, name);
    append_u64(payload, values.size());
    if (!values.empty()) payload.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  return payload;
}

// Reads the payload with bounds checks: a malformed payload (with a good checksum, so written by a
// different program) is a DataError, never a crash.
class PayloadReader {
 public:
  PayloadReader(const std::string& path, const char* data, std::size_t bytes)
      : path_(path), data_(data), bytes_(bytes) {}
  std::uint64_t u64() {
    std::uint64_t value = 0;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::string text() {
    const std::uint64_t length = u64();
    return std::string(take(length), length);
  }
  std::vector<float> floats() {
    const std::uint64_t count = u64();
    if (count > bytes_ / sizeof(float)) fail("an array longer than the file");
    std::vector<float> values(count);
    const char* bytes = take(count * sizeof(float));
    if (count > 0) std::memcpy(values.data(), bytes, count * sizeof(float));
    return values;
  }
  bool at_end() const { return position_ == bytes_; }
  [[noreturn]] void fail(const std::string& what) const {
    STRIDER_THROW(DataError, "checkpoint " + path_ + " is corrupted (" + what + ")");
  }

 private:
  const char* take(std::uint64_t bytes) {
    if (bytes > bytes_ - position_) fail("a record runs past the end of the payload");
    const char* start = data_ + position_;
    position_ += bytes;
    return start;
  }
  const std::string& path_;
  const char* data_;
  std::size_t bytes_;
  std::size_t position_ = 0;
};

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_all(int descriptor, const std::string& bytes, const std::string& temporary) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t result = ::write(descriptor, bytes.data() + written, bytes.size() - written);
    if (result < 0) {
      if (errno == EINTR) continue;
      STRIDER_THROW_ERRNO("write(" + temporary + ")", "writing checkpoint " + temporary, errno);
    }
    written += static_cast<std::size_t>(result);
  }
}

}  // namespace

const std::string& Checkpoint::field(const std::string& name) const {
  const auto found = fields.find(name);
  if (found == fields.end()) STRIDER_THROW(DataError, "checkpoint lacks field " + name);
  return found->second;
}

const std::vector<float>& Checkpoint::array(const std::string& name) const {
  const auto found = arrays.find(name);
  if (found == arrays.end()) STRIDER_THROW(DataError, "checkpoint lacks array " + name);
  return found->second;
}

bool checkpoint_exists(const std::string& path) {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode);
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  const std::string payload = serialize_payload(checkpoint);
  Fnv1a64 checksum;
  checksum.add_bytes(payload.data(), payload.size());
  std::string bytes(magic, magic_bytes);
  append_u64(bytes, payload.size());
  bytes += payload;
  append_u64(bytes, checksum.value());

  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) STRIDER_THROW_ERRNO("open(" + temporary + ")", "creating checkpoint file " + temporary, errno);
  try {
    // Test-only (STRIDER_TEST_KILL_IN_CHECKPOINT): die halfway through the temporary file, as a node
    // that fails mid-write would; the previous checkpoint must stay usable.
    static std::atomic<std::int64_t> writes{0};
    if (++writes == detail::test_hooks().kill_in_checkpoint) {
      write_all(descriptor, bytes.substr(0, bytes.size() / 2), temporary);
      ::fsync(descriptor);
      ::raise(SIGKILL);
    }
    write_all(descriptor, bytes, temporary);
    if (::fsync(descriptor) != 0)
      STRIDER_THROW_ERRNO("fsync(" + temporary + ")", "flushing checkpoint " + temporary, errno);
    if (::close(descriptor) != 0) {
      const int error_number = errno;
      ::unlink(temporary.c_str());
      STRIDER_THROW_ERRNO("close(" + temporary + ")", "closing checkpoint " + temporary, error_number);
    }
  } catch (...) {
    ::close(descriptor);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(temporary.c_str());
    STRIDER_THROW_ERRNO("rename(" + temporary + ", " + path + ")", "replacing checkpoint " + path, error_number);
  }
  // The rename is durable once the directory entry is: fsync the directory.
  const std::string directory = directory_of(path);
  const int directory_descriptor = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_descriptor < 0)
    STRIDER_THROW_ERRNO("open(" + directory + ")", "syncing directory of checkpoint " + path, errno);
  const int synced = ::fsync(directory_descriptor);
  const int error_number = errno;
  ::close(directory_descriptor);
  // Some file systems (network ones) refuse fsync on a directory; the rename has happened regardless.
  if (synced != 0 && error_number != EINVAL && error_number != ENOTSUP) {
    STRIDER_THROW_ERRNO("fsync(" + directory + ")", "syncing directory of checkpoint " + path, error_number);
  }
}

Checkpoint read_checkpoint(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT) STRIDER_THROW(CheckpointNotFound, "checkpoint " + path + " does not exist");
    STRIDER_THROW_ERRNO("fopen(" + path + ")", "opening checkpoint " + path, errno);
  }
  std::string bytes;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) bytes.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  const int error_number = errno;
  std::fclose(file);
  if (failed) STRIDER_THROW_ERRNO("fread(" + path + ")", "reading checkpoint " + path, error_number);

  if (bytes.size() < magic_bytes || bytes.compare(0, magic_bytes, magic, magic_bytes) != 0) {
    if (bytes.size() < magic_bytes && std::string(magic, bytes.size()) == bytes) {
      STRIDER_THROW(DataError, "checkpoint " + path + " is truncated (expected at least " +
                                   std::to_string(header_bytes + trailer_bytes) + " bytes, found " +
                                   std::to_string(bytes.size()) + ")");
    }
    STRIDER_THROW(DataError, "checkpoint " + path + " is not a strider checkpoint (bad magic)");
  }
  if (bytes.size() < header_bytes) {
    STRIDER_THROW(DataError, "checkpoint " + path + " is truncated (expected at least " +
                                 std::to_string(header_bytes + trailer_bytes) + " bytes, found " +
                                 std::to_string(bytes.size()) + ")");
  }
  std::uint64_t payload_bytes = 0;
  std::memcpy(&payload_bytes, bytes.data() + magic_bytes, sizeof payload_bytes);
  const std::uint64_t available = bytes.size() - header_bytes;
  if (payload_bytes > available || available - payload_bytes < trailer_bytes) {
    // A huge length is as likely a flipped length byte as a short file: say both numbers.
    STRIDER_THROW(DataError, "checkpoint " + path + " is truncated (expected " +
                                 std::to_string(header_bytes + payload_bytes + trailer_bytes) + " bytes, found " +
                                 std::to_string(bytes.size()) + ")");
  }
  if (available - payload_bytes > trailer_bytes) {
    STRIDER_THROW(DataError, "checkpoint " + path + " is corrupted (" +
                                 std::to_string(available - payload_bytes - trailer_bytes) +
                                 " bytes after the checksum)");
  }
  const char* payload = bytes.data() + header_bytes;
  std::uint64_t stored = 0;
  std::memcpy(&stored, payload + payload_bytes, sizeof stored);
  Fnv1a64 checksum;
  checksum.add_bytes(payload, payload_bytes);
  if (checksum.value() != stored) STRIDER_THROW(DataError, "checkpoint " + path + " is corrupted (checksum mismatch)");

  PayloadReader reader(path, payload, payload_bytes);
  Checkpoint checkpoint;
  const std::uint64_t field_count = reader.u64();
  for (std::uint64_t i = 0; i < field_count; ++i) {
    std::string name = reader.text();
    checkpoint.fields[name] = reader.text();
  }
  const std::uint64_t array_count = reader.u64();
  for (std::uint64_t i = 0; i < array_count; ++i) {
    std::string name = reader.text();
    checkpoint.arrays[name] = reader.floats();
  }
  if (!reader.at_end()) reader.fail("bytes left after the last array");
  return checkpoint;
}

void save_model(const Backend& backend, Checkpoint& checkpoint) {
  checkpoint.fields["model.config"] = model_config_text(backend.config());
  checkpoint.fields["model.backend"] = backend.name();
  checkpoint.arrays["model.parameters"] = backend.parameters();
  checkpoint.arrays["optimizer.velocity"] = backend.optimizer_state();
  if (const std::optional<Normalization>& normalization = backend.config().normalization) {
    checkpoint.fields["input.normalization"] = statistics_layout_name(normalization->layout);
    checkpoint.arrays["input.mean"] = normalization->mean;
    checkpoint.arrays["input.stddev"] = normalization->stddev;
  }
}

void load_model(const Checkpoint& checkpoint, Backend& backend) {
  const std::string& stored = checkpoint.field("model.config");
  const std::string current = model_config_text(backend.config());
  if (stored != current) {
    STRIDER_THROW(DataError, "checkpoint model (" + stored + ") does not match this run (" + current + ")");
  }
  const auto check_length = [&](const char* name) -> const std::vector<float>& {
    const std::vector<float>& values = checkpoint.array(name);
    if (static_cast<std::int64_t>(values.size()) != backend.parameter_count()) {
      STRIDER_THROW(DataError, std::string("checkpoint array ") + name + " holds " + std::to_string(values.size()) +
                                   " values, the model has " + std::to_string(backend.parameter_count()) +
                                   " parameters");
    }
    return values;
  };
  // Normalized inputs: the recorded statistics, not this run's (computed at another rank count they
  // could differ in the last bits).
  const auto stored_layout = checkpoint.fields.find("input.normalization");
  const bool stored_normalized = stored_layout != checkpoint.fields.end();
  if (stored_normalized != backend.config().normalization.has_value())
    STRIDER_THROW(DataError, std::string("the checkpoint was trained on ") +
                                 (stored_normalized ? "normalized" : "unnormalized") + " inputs, this run asks for " +
                                 (stored_normalized ? "unnormalized" : "normalized") +
                                 " ones (pass the --normalize it was trained with)");
  if (stored_normalized) {
    ModelConfig config = backend.config();
    Normalization& normalization = config.normalization.value();
    bool known = false;
    for (StatisticsLayout layout :
         {StatisticsLayout::per_feature, StatisticsLayout::channels_first, StatisticsLayout::channels_last})
      if (stored_layout->second == statistics_layout_name(layout)) {
        normalization.layout = layout;
        known = true;
      }
    if (!known) STRIDER_THROW(DataError, "checkpoint input.normalization '" + stored_layout->second + "' is unknown");
    normalization.mean = checkpoint.array("input.mean");
    normalization.stddev = checkpoint.array("input.stddev");
    backend.initialize(config);  // checks the statistics against the samples
  }
  backend.set_parameters(check_length("model.parameters"));
  backend.set_optimizer_state(check_length("optimizer.velocity"));
}

}  // namespace strider
