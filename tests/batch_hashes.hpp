#pragma once
// Hashes of delivered batches, shared by the prefetcher (unit) and pipeline (MPI) tests: a batch
// from the prefetcher and the same batch read directly with a reader must hash the same.

#include <vector>

#include "strider/core/hash.hpp"
#include "strider/io/batch_reader.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider::testing {

/// Hash of a step's indices, sample bytes, labels (may be null) and offsets (null: fixed-size).
inline std::uint64_t batch_hash(std::int64_t step, const std::vector<std::int64_t>& indices, const std::byte* samples,
                                std::int64_t samples_bytes, const std::int32_t* labels, const std::int64_t* offsets) {
  Fnv1a64 hash;
  hash.add(step);
  for (std::int64_t index : indices) hash.add(index);
  hash.add_bytes(samples, static_cast<std::size_t>(samples_bytes));
  if (labels != nullptr) hash.add_bytes(labels, indices.size() * 4);
  if (offsets != nullptr) hash.add_bytes(offsets, (indices.size() + 1) * 8);
  return hash.value();
}

/// batch_hash of a prefetched batch.
inline std::uint64_t batch_hash(const Batch& batch) {
  return batch_hash(batch.step(), batch.indices(), batch.samples(), batch.samples_bytes(), batch.labels(),
                    batch.offsets());
}

/// batch_hash of every step of the sampler's epoch, read directly with `reader` (no prefetcher).
inline std::vector<std::uint64_t> direct_batch_hashes(BatchReader& reader, const Sampler& sampler) {
  std::vector<std::uint64_t> hashes;
  std::vector<std::int64_t> indices;
  const bool sequences = reader.info().variable_length;
  for (std::int64_t step = 0; step < sampler.num_steps(); ++step) {
    sampler.batch(step, indices);
    const auto count = static_cast<std::int64_t>(indices.size());
    const std::int64_t bytes = reader.samples_bytes(indices.data(), count);
    std::vector<std::byte> samples(static_cast<std::size_t>(bytes) + 1);
    std::vector<std::int32_t> labels(indices.size());
    std::vector<std::int64_t> offsets(indices.size() + 1);
    reader.read(
        indices.data(), count,
        BatchDestination{samples.data(), static_cast<std::int64_t>(samples.size()),
                         reader.info().has_labels ? labels.data() : nullptr, sequences ? offsets.data() : nullptr});
    hashes.push_back(batch_hash(step, indices, samples.data(), bytes,
                                reader.info().has_labels ? labels.data() : nullptr,
                                sequences ? offsets.data() : nullptr));
  }
  return hashes;
}

/// batch_hash of every batch the prefetcher delivers for steps [first_step, end) of the epoch.
inline std::vector<std::uint64_t> prefetched_batch_hashes(Prefetcher& prefetcher, const Sampler& sampler,
                                                          std::int64_t first_step = 0) {
  std::vector<std::uint64_t> hashes;
  prefetcher.start_epoch(sampler, first_step);
  while (auto batch = prefetcher.next()) hashes.push_back(batch_hash(*batch));
  return hashes;
}

}  // namespace strider::testing
