#pragma once
/// \file
/// The dataset fingerprint a checkpoint records, so that a resumed run refuses other data but accepts
/// the same data staged elsewhere.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strider/core/shared_view.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

/// FNV-1a 64 over what makes the data the same for training: the dataset names that are read (the
/// samples, or the tokens and offsets, and the labels when present), whether it holds sequences, the
/// number of samples, the sample shape, the element type, the number of tokens, every label and
/// every sequence length, and for data split over several files the shards' order (their file
/// names) and row counts. Not the directories, the storage layout, chunking or compression. Not
/// collective (every rank computes the same value from the same files).
std::uint64_t dataset_fingerprint(const DatasetInfo& dataset, const SharedView<std::int32_t>& labels,
                                  const SharedView<std::int64_t>& lengths, const DatasetKeys& keys);

/// Fills out with labels [first, first + count).
using LabelRangeReader = std::function<void(std::int64_t first, std::int64_t count, std::int32_t* out)>;

/// The same fingerprint with `label_count` labels streamed through `read_labels` a chunk at a time
/// (memory does not grow with N: labels read per batch, BatchReader::read_labels). Also returns the
/// largest label in *max_label (0 without labels) when max_label is not null.
std::uint64_t dataset_fingerprint(const DatasetInfo& dataset, std::int64_t label_count,
                                  const LabelRangeReader& read_labels, const SharedView<std::int64_t>& lengths,
                                  const DatasetKeys& keys, std::int32_t* max_label = nullptr);

/// The fingerprint as 16 lowercase hex digits (how checkpoints and stats store it).
std::string fingerprint_hex(std::uint64_t fingerprint);

}  // namespace strider
