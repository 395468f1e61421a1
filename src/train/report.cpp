#include "train/report.hpp"

#include <iomanip>
#include <sstream>

#include "strider/core/option_text.hpp"

namespace strider::detail {
namespace {

/// "0:0.990 1:0.850": class and recall, three decimals.
std::string format_recall(const std::vector<double>& recall) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(3);
  for (std::size_t c = 0; c < recall.size(); ++c) text << (c ? " " : "") << c << ":" << recall[c];
  return text.str();
}

}  // namespace

std::string epoch_line(const EpochSummary& epoch, std::int64_t epochs, bool stopped, bool sequences) {
  std::ostringstream line;
  line << std::fixed << "epoch " << epoch.epoch + 1 << "/" << epochs << (stopped ? " (stopped)" : "") << ": loss "
       << std::setprecision(4) << epoch.loss << " accuracy " << std::setprecision(3) << epoch.accuracy << " samples/s "
       << std::setprecision(0) << epoch.samples_per_s << " stall " << std::setprecision(1)
       << 100.0 * epoch.stall_fraction << "% (" << epoch.steps << " steps, " << std::setprecision(2) << epoch.seconds
       << " s)";
  if (sequences) line << " padding efficiency " << std::setprecision(3) << epoch.padding_efficiency;
  return line.str();
}

std::string evaluation_line(const std::string& path, double accuracy, std::int64_t samples, double seconds,
                            const std::vector<double>& recall) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "evaluation on " << path << ": accuracy " << accuracy << " over "
       << samples << " samples (" << std::setprecision(2) << seconds << " s); per-class recall "
       << format_recall(recall);
  return line.str();
}

std::string final_recall_line(const std::vector<double>& recall) {
  return "per-class recall: " + format_recall(recall);
}

std::string class_weights_line(const std::vector<double>& weights) {
  return "class weights now " + format_real_list(weights);
}

std::string stopped_line() {
  return "stopped by a signal; checkpoint written, exiting with status 75 to be requeued";
}

}  // namespace strider::detail
