#pragma once
/// \file
/// Building a sampler of any mode from one options struct (what the apps' --sampler options fill).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/core/shared_view.hpp"
#include "strider/sampling/class_index.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/sampling/sampler.hpp"

namespace strider {

/// Everything any sampling mode may need. Fields a mode does not use are ignored. The partition
/// (dataset_size, batch_size, shuffle, drop_last, drop_last_batch, seed) is PartitionConfig's.
struct SamplerOptions : PartitionConfig {
  std::string mode = "distributed";  ///< one of sampler_modes()

  /// Per-sample class labels 0..K-1 (class-aware modes), a view so that samplers of several ranks
  /// or epochs do not copy them: a shared vector (assign a shared_ptr<const vector>), or the
  /// Loader's store segment, held once per node. Null when the dataset has none.
  SharedView<std::int32_t> labels;
  /// Per-sample lengths in tokens (bucketed mode), held as labels. Null for fixed-size samples.
  SharedView<std::int64_t> lengths;
  /// distributed, with shuffle: each epoch's order made once for several ranks (the Loader's, once
  /// per node); null: each rank shuffles it. Ignored by the other modes.
  std::shared_ptr<SharedOrder> shared_order;
  /// bucketed: each epoch's plan made once for several ranks (the Loader's, once per node); null:
  /// each rank makes it. Ignored by the other modes.
  std::shared_ptr<SharedPlan> shared_plan;

  // ---- class-aware modes (balanced, weighted, stratified) ----
  /// The per-class lists of `labels`, built once for several samplers (the Loader's two, or the
  /// node's ranks: memory they share); null: each sampler builds its own.
  std::shared_ptr<const ClassIndex> class_index;
  std::vector<double> class_weights;  ///< weighted: per-class weights, K entries (empty: 1/count)
  /// weighted: per-sample weights, N entries, instead of class weights. Null: class weights.
  std::shared_ptr<const std::vector<double>> sample_weights;
  std::int64_t num_samples = 0;          ///< weighted, stratified: samples per epoch, all ranks (0: N)
  std::string balance = "max";           ///< balanced: max | min | a per-class count
  std::string stratify_target = "freq";  ///< stratified: freq | uniform | w0,w1,... (one per class)

  // ---- length-bucketed and streaming modes (bucketed, streaming, block) ----
  std::int64_t max_tokens = 0;           ///< bucketed: budget per batch, count * longest length (tokens)
  std::int64_t max_batch_size = 0;       ///< bucketed: at most this many samples per batch (0: no limit)
  std::int64_t batch_size_multiple = 1;  ///< bucketed: sample counts per batch are a multiple of this
  std::int64_t megabatch = 64;           ///< bucketed: sort window in batches' worth of tokens (0: the epoch)
  std::int64_t step_group = 64;          ///< bucketed: batches sorted by cost per group (balances steps)
  bool most_expensive_first = false;     ///< bucketed: the costliest batch runs at step 0
  std::int64_t block_size = 0;           ///< block: contiguous samples per block (> 0)
  std::int64_t block_window = 8;         ///< block: blocks per within-rank shuffle window
  /// block: false keeps the blocks in storage order, so that rank r reads the same range every epoch,
  /// shuffled within its windows; with block_size 0, one block per rank of ceil(N/R) samples and one
  /// window: MLPerf Storage's (DLIO's) local shuffle. Not a command-line option of its own
  /// (strider-bench --shuffle local).
  bool shuffle_blocks = true;
};

/// The modes make_sampler knows, in the order the CLI lists them.
std::vector<std::string> sampler_modes();

/// True for the modes whose plan needs every label (balanced, weighted, stratified); the others can
/// leave labels in the file (ReaderOptions::labels_in_memory false) and read them with each batch.
bool sampler_needs_labels(const std::string& mode);

/// Builds rank `rank` of `world_size`'s sampler. Throws UsageError for an unknown mode or options
/// the mode cannot use. Pure: no MPI, no I/O.
std::unique_ptr<Sampler> make_sampler(const SamplerOptions& options, int world_size, int rank);

}  // namespace strider
