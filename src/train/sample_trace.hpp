#pragma once
// The sample trace of one rank (strider-train --trace-samples): which samples each trained step
// held, one line "epoch step id id ..." per step, so that tests and users can compare runs.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace strider::detail {

/// Writes the trace file `base`.rank<r>. Default-constructed: writes nothing. Not thread-safe.
class SampleTrace {
 public:
  SampleTrace() = default;
  /// Opens `base`.rank<rank> for writing. A resumed run (resuming) keeps the lines of steps before
  /// (resume_epoch, resume_step) and drops the rest, so that the finished trace equals the trace of
  /// an uninterrupted run. Throws SystemError when the file cannot be written. Not collective.
  SampleTrace(const std::string& base, int rank, std::int64_t resume_epoch, std::int64_t resume_step, bool resuming);

  /// Adds the line of one trained step (nothing when not opened).
  void write(std::int64_t epoch, std::int64_t step, const std::vector<std::int64_t>& indices);
  /// Flushes what was written (nothing when not opened).
  void flush();

 private:
  std::string path_;
  std::ofstream file_;
};

}  // namespace strider::detail
