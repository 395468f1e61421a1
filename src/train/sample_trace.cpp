#include "train/sample_trace.hpp"

#include <sstream>

#include "strider/core/error.hpp"

namespace strider::detail {

SampleTrace::SampleTrace(const std::string& base, int rank, std::int64_t resume_epoch, std::int64_t resume_step,
                         bool resuming) {
  path_ = base + ".rank" + std::to_string(rank);
  std::string kept;
  if (resuming) {
    std::ifstream old(path_);
    std::string line;
    while (std::getline(old, line)) {
      std::istringstream fields(line);
      std::int64_t epoch = -1, step = -1;
      if (!(fields >> epoch >> step)) continue;
      if (epoch < resume_epoch || (epoch == resume_epoch && step < resume_step)) kept += line + "\n";
    }
  }
  file_.open(path_, std::ios::trunc);
  if (!file_) STRIDER_THROW(SystemError, "cannot write the sample trace '" + path_ + "'");
  file_ << kept;
}

void SampleTrace::write(std::int64_t epoch, std::int64_t step, const std::vector<std::int64_t>& indices) {
  if (!file_.is_open()) return;
  file_ << epoch << ' ' << step;
  for (std::int64_t index : indices) file_ << ' ' << index;
  file_ << '\n';
}

void SampleTrace::flush() {
  if (file_.is_open()) file_.flush();
}

}  // namespace strider::detail
