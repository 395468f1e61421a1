#include "train/evaluation.hpp"

#include <memory>
#include <string>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/train/batch_input.hpp"
#include "strider/train/model.hpp"

namespace strider::detail {

namespace {

/// A label of the evaluation file outside the classes the model was trained on: a DataError naming
/// the file, the label and its sample.
void check_training_class(std::int32_t label, std::int64_t sample, int num_classes, const std::string& path) {
  if (label < 0 || label >= num_classes)
    STRIDER_THROW(DataError, "evaluation file " + path + ": label " + std::to_string(label) + " of sample " +
                                 std::to_string(sample) + " is outside the training classes 0.." +
                                 std::to_string(num_classes - 1));
}

}  // namespace

void check_evaluation_data(const Communicator& comm, const Backend& backend, const LoaderOptions& options,
                           int num_classes) {
  ReaderOptions reader_options = options.reader;
  reader_options.require_labels = true;
  reader_options.labels_needed_by = "evaluation";
  reader_options.labels_in_memory = true;  // held only while they are checked
  const std::unique_ptr<BatchReader> reader = open_reader(comm, options.data_path, reader_options);
  comm.collective_try([&] {
    const bool model_takes_sequences = backend.config().kind == "bag";
    const auto kind = [](bool sequences) { return sequences ? "token sequences" : "fixed-size samples"; };
    if (reader->info().variable_length != model_takes_sequences)
      STRIDER_THROW(UsageError, "evaluation file " + options.data_path + " holds " +
                                    kind(reader->info().variable_length) + ", but the model trained here takes " +
                                    kind(model_takes_sequences));
    resolve_model_config(backend.config(), reader->info());
    if (!comm.is_root()) return;
    const SharedView<std::int32_t> labels = reader->labels();
    for (std::size_t i = 0; i < labels.size(); ++i)
      check_training_class(labels[i], static_cast<std::int64_t>(i), num_classes, options.data_path);
  });
}

ClassCounts evaluate_exactly(const Communicator& comm, Backend& backend, LoaderOptions options, int num_classes,
                             bool check_model_fits) {
  options.split = LoaderSplit::exact;
  options.reader.require_labels = true;
  options.reader.labels_needed_by = "evaluation";
  options.labels_in_memory = false;  // each batch brings its labels
  options.epochs = 1;
  Loader loader(comm, std::move(options));
  comm.collective_try([&] {
    if (check_model_fits) resolve_model_config(backend.config(), loader.dataset());
  });
  ClassCounts counts(num_classes);
  {
    LoaderEpoch epoch = loader.epoch(0);
    // The exact split gives ranks different step counts: no collective until the loop ends.
    comm.collective_try([&] {
      std::vector<std::int32_t> predictions;
      while (std::optional<Batch> batch = epoch.next()) {
        predictions.resize(static_cast<std::size_t>(batch->size()));
        backend.predict(batch_input(*batch, loader.dataset()), predictions.data());
        for (std::int64_t i = 0; i < batch->size(); ++i)
          check_training_class(batch->labels()[i], batch->indices()[static_cast<std::size_t>(i)], num_classes,
                               loader.dataset().path);
        counts.add(batch->labels(), predictions.data(), batch->size());
      }
    });
  }
  counts.all_reduce(comm);
  loader.close();
  if (counts.total() != loader.dataset().num_samples)
    STRIDER_THROW(Error, "evaluation counted " + std::to_string(counts.total()) + " samples of " +
                             std::to_string(loader.dataset().num_samples));
  return counts;
}

}  // namespace strider::detail
