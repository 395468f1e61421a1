#include "strider/pipeline/loader_options.hpp"

#include "pipeline/option_checks.hpp"
#include "strider/core/error.hpp"
#include "strider/core/option_text.hpp"
#include "strider/pipeline/prefetcher.hpp"

namespace strider {

namespace {

using Setter = std::function<void(LoaderOptions&, std::string_view)>;
using Getter = std::function<std::string(const LoaderOptions&)>;

/// A text option bound to a string member (`member` is a generic lambda: options -> member&).
template <typename Member>
LoaderOption text_option(std::string name, std::string group, std::string help, Member member) {
  LoaderOption option{std::move(name), std::move(group), OptionType::text, "", std::move(help), nullptr, nullptr};
  option.set = [member](LoaderOptions& options, std::string_view text) { member(options) = std::string(text); };
  option.get = [member](const LoaderOptions& options) { return member(options); };
  return option;
}

/// A text option whose value is one of `choices` (check_choice: a typo gets the nearest name).
template <typename Member>
LoaderOption choice_option(std::string name, std::string group, std::string help, std::string what,
                           std::vector<std::string> choices, Member member) {
  LoaderOption option = text_option(std::move(name), std::move(group), std::move(help), member);
  option.set = [member, what, choices](LoaderOptions& options, std::string_view text) {
    check_choice(text, choices, what);
    member(options) = std::string(text);
  };
  return option;
}

/// An int64 option bound to a member; values below `minimum` are refused with "--name must be >= minimum".
template <typename Member>
LoaderOption int64_option(std::string name, std::string group, std::string help, Member member,
                          std::optional<std::int64_t> minimum = std::nullopt) {
  LoaderOption option{name, std::move(group), OptionType::int64, "", std::move(help), nullptr, nullptr};
  option.set = [name, member, minimum](LoaderOptions& options, std::string_view text) {
    const std::int64_t value = parse_integer_option(text, name);
    if (minimum) detail::check_option_at_least(name, value, *minimum);
    member(options) = value;
  };
  option.get = [member](const LoaderOptions& options) { return std::to_string(member(options)); };
  return option;
}

/// A flag bound to a bool member; `inverted` for flags that switch a default-on setting off.
template <typename Member>
LoaderOption flag_option(std::string name, std::string group, std::string help, Member member, bool inverted = false) {
  LoaderOption option{name, std::move(group), OptionType::flag, "", std::move(help), nullptr, nullptr};
  option.set = [name, member, inverted](LoaderOptions& options, std::string_view text) {
    member(options) = parse_flag_option(text, name) != inverted;
  };
  option.get = [member, inverted](const LoaderOptions& options) {
    return member(options) != inverted ? std::string("true") : std::string("false");
  };
  return option;
}

/// --batch-size: a count >= 1, or "all" (SamplerOptions' 0: the whole epoch as one batch), which
/// must be asked for by name.
std::int64_t parse_batch_size(std::string_view text) {
  if (text == "all") return 0;
  const std::int64_t value = parse_integer_option(text, "batch-size");
  if (value < 1)
    STRIDER_THROW(UsageError,
                  "--batch-size must be >= 1, or 'all' for one batch of the whole epoch; got " + std::string(text));
  if (value > kMaxBatchSize)
    STRIDER_THROW(UsageError,
                  "--batch-size must be at most " + std::to_string(kMaxBatchSize) + ", got " + std::string(text));
  return value;
}

std::string batch_size_text(std::int64_t batch_size) {
  return batch_size == 0 ? std::string("all") : std::to_string(batch_size);
}

std::vector<LoaderOption> build_table() {
  std::string modes;
  for (const std::string& mode : sampler_modes()) modes += (modes.empty() ? "" : "|") + mode;
  std::vector<LoaderOption> table = {
      // ---- data: the file, its dataset names and the engine ----
      text_option(
          "data", "data",
          "the dataset: an HDF5 file, or its shards: a,b,c | 'dir/*.h5' | a directory | @list.txt (byte-wise order)",
          [](auto& o) -> auto& { return o.data_path; }),
      text_option(
          "data-key", "data", "dataset of fixed-size samples [N, ...]",
          [](auto& o) -> auto& { return o.reader.keys.data; }),
      text_option(
          "label-key", "data",
          "dataset of integer labels [N]: /labels is read when present, another name must exist, none reads none",
          [](auto& o) -> auto& { return o.reader.keys.labels; }),
      text_option(
          "tokens-key", "data", "sequences: dataset of all tokens [T], or h5py vlen sequences [N] (then no offsets)",
          [](auto& o) -> auto& { return o.reader.keys.tokens; }),
      text_option(
          "offsets-key", "data", "sequences: int64 [N+1], row i is tokens[offsets[i]:offsets[i+1]]",
          [](auto& o) -> auto& { return o.reader.keys.offsets; }),
      choice_option(
          "engine", "data",
          "reader engine: auto | hdf5 | direct | mmap (auto: mmap for contiguous native data, else hdf5)", "engine",
          reader_engines(), [](auto& o) -> auto& { return o.reader.engine; }),
      flag_option(
          "odirect", "data",
          "direct engine: read with O_DIRECT, bypassing the page cache (4 KiB-aligned reads; auto then picks direct)",
          [](auto& o) -> auto& { return o.reader.odirect; }),
      // ---- sampling: the mode, the seed, the batch and every mode's options ----
      choice_option(
          "sampler", "sampling", "sampling mode: " + modes, "sampler", sampler_modes(),
          [](auto& o) -> auto& { return o.sampler.mode; }),
      LoaderOption{"batch-size", "sampling", OptionType::text, "",
                   "samples per rank per step, or 'all': one batch of the whole epoch",
                   [](LoaderOptions& o, std::string_view text) { o.sampler.batch_size = parse_batch_size(text); },
                   [](const LoaderOptions& o) { return batch_size_text(o.sampler.batch_size); }},
      flag_option(
          "no-shuffle", "sampling", "keep the dataset order (torch's shuffle=False)",
          [](auto& o) -> auto& { return o.sampler.shuffle; }, true),
      flag_option(
          "drop-last", "sampling", "drop the tail so every rank gets floor(N/R) samples (torch's drop_last)",
          [](auto& o) -> auto& { return o.sampler.drop_last; }),
      flag_option(
          "drop-last-batch", "sampling", "drop a last partial batch",
          [](auto& o) -> auto& { return o.sampler.drop_last_batch; }),
      // class-aware modes (balanced, weighted, stratified)
      LoaderOption{"class-weights", "sampling", OptionType::text, "",
                   "weighted: w0,w1,... one weight per class; each sample of class c weighs w_c (default 1/count_c)",
                   [](LoaderOptions& o, std::string_view text) {
                     o.sampler.class_weights = parse_real_list(text, "class-weights");
                   },
                   [](const LoaderOptions& o) { return format_real_list(o.sampler.class_weights); }},
      text_option(
          "balance", "sampling",
          "balanced: samples per class per epoch: max (oversample), min (undersample) or a count",
          [](auto& o) -> auto& { return o.sampler.balance; }),
      text_option(
          "stratify-target", "sampling", "stratified: class proportions of every batch: freq, uniform or w0,w1,...",
          [](auto& o) -> auto& { return o.sampler.stratify_target; }),
      int64_option(
          "num-samples", "sampling", "weighted, stratified: samples per epoch over all ranks (0: the dataset size)",
          [](auto& o) -> auto& { return o.sampler.num_samples; }, 0),
      // length-bucketed and block modes
      int64_option(
          "max-tokens", "sampling", "bucketed: token budget per batch, count x longest length",
          [](auto& o) -> auto& { return o.sampler.max_tokens; }),
      int64_option(
          "max-batch-size", "sampling", "bucketed: at most this many samples per batch (0: no limit)",
          [](auto& o) -> auto& { return o.sampler.max_batch_size; }),
      int64_option(
          "batch-size-multiple", "sampling",
          "bucketed: samples per batch are a multiple of this (but the epoch's last batch)",
          [](auto& o) -> auto& { return o.sampler.batch_size_multiple; }),
      int64_option(
          "megabatch", "sampling",
          "bucketed: sort lengths within windows of this many batches' worth of tokens (0: the whole epoch)",
          [](auto& o) -> auto& { return o.sampler.megabatch; }),
      int64_option(
          "step-group", "sampling",
          "bucketed: sort batches by cost within groups of this many, so a step's ranks cost alike",
          [](auto& o) -> auto& { return o.sampler.step_group; }),
      flag_option(
          "most-expensive-first", "sampling",
          "bucketed: run the costliest batch at step 0 (memory failures show at once)",
          [](auto& o) -> auto& { return o.sampler.most_expensive_first; }),
      int64_option(
          "block-size", "sampling", "block: contiguous samples per block",
          [](auto& o) -> auto& { return o.sampler.block_size; }),
      int64_option(
          "block-window", "sampling", "block: a rank's samples are shuffled within windows of this many blocks",
          [](auto& o) -> auto& { return o.sampler.block_window; }),
      LoaderOption{"seed", "sampling", OptionType::int64, "",
                   "the seed of every epoch's order (int64); none: drawn on rank 0 and logged",
                   [](LoaderOptions& o, std::string_view text) { o.seed = parse_integer_option(text, "seed"); },
                   [](const LoaderOptions& o) { return o.seed ? std::to_string(*o.seed) : std::string(); }},
      // ---- pipeline: reading ahead ----
      LoaderOption{"prefetch", "pipeline", OptionType::int32, "",
                   "batches read ahead per rank (1..64; 0: auto, 16 MiB of batches, 4..64)",
                   [](LoaderOptions& o, std::string_view text) {
                     const int depth = parse_int_option(text, "prefetch");
                     detail::check_prefetch_option(depth);
                     o.prefetch = depth;
                   },
                   [](const LoaderOptions& o) { return std::to_string(o.prefetch); }},
      LoaderOption{"io-thread", "pipeline", OptionType::text, "",
                   "read ahead on an I/O thread (yes), on the caller's thread when it asks (no), or measure both "
                   "in the first epoch and keep the faster (auto)",
                   [](LoaderOptions& o, std::string_view text) {
                     check_choice(text, {"auto", "yes", "no"}, "--io-thread value");
                     o.io_thread = text != "no";
                     o.measure_thread_layout = text == "auto";
                   },
                   [](const LoaderOptions& o) {
                     return std::string(!o.io_thread ? "no" : o.measure_thread_layout ? "auto" : "yes");
                   }},
      flag_option(
          "plan-per-rank", "diagnostics",
          "distributed and bucketed samplers: every rank makes each epoch's whole order or plan itself, rather "
          "than once per node into memory the node's ranks share (the same batches; for measuring)",
          [](auto& o) -> auto& { return o.diagnostics.plan_per_node; }, true),
      LoaderOption{"copy-threads", "pipeline", OptionType::int32, "",
                   "direct/mmap: threads that copy one batch; hdf5: threads that inflate its deflate chunks",
                   [](LoaderOptions& o, std::string_view text) {
                     const int threads = parse_int_option(text, "copy-threads");
                     detail::check_option_at_least("copy-threads", threads, 1);
                     if (threads > kMaxCopyThreads)
                       STRIDER_THROW(UsageError, "--copy-threads must be at most " + std::to_string(kMaxCopyThreads) +
                                                     ", got " + std::string(text));
                     o.reader.copy_threads = threads;
                   },
                   [](const LoaderOptions& o) { return std::to_string(o.reader.copy_threads); }},
      LoaderOption{"max-open-files", "pipeline", OptionType::int32, "",
                   "shards a rank keeps open at once (hdf5: files, direct: descriptors; least recently read closed "
                   "first)",
                   [](LoaderOptions& o, std::string_view text) {
                     const int files = parse_int_option(text, "max-open-files");
                     detail::check_option_at_least("max-open-files", files, 1);
                     o.reader.max_open_files = files;
                   },
                   [](const LoaderOptions& o) { return std::to_string(o.reader.max_open_files); }},
      LoaderOption{"store", "store", OptionType::text, "",
                   "none | memory: load the dataset once into memory shared by each node's ranks and serve every "
                   "batch from there (epochs after the first read nothing from the file)",
                   [](LoaderOptions& o, std::string_view text) {
                     StoreOptions store = o.store;
                     store.mode = std::string(text);
                     check_store_options(store);
                     o.store = store;
                   },
                   [](const LoaderOptions& o) { return o.store.mode; }},
      LoaderOption{"store-layout", "store", OptionType::text, "",
                   "partition (each node holds its ranks' share of the rows) | replicate (every node holds every "
                   "row) | auto (replicate when the dataset fits one node's budget)",
                   [](LoaderOptions& o, std::string_view text) {
                     StoreOptions store = o.store;
                     store.layout = std::string(text);
                     check_store_options(store);
                     o.store = store;
                   },
                   [](const LoaderOptions& o) { return o.store.layout; }},
      LoaderOption{"store-budget", "store", OptionType::text, "",
                   "the store's memory per node, bytes or 512M, 8G, ... (0: half of the least of MemAvailable, the "
                   "cgroup's memory.max and the free space of /dev/shm)",
                   [](LoaderOptions& o, std::string_view text) {
                     o.store.budget_bytes = parse_byte_size_option(text, "store-budget");
                   },
                   [](const LoaderOptions& o) { return std::to_string(o.store.budget_bytes); }},
      int64_option(
          "lookahead", "pipeline",
          "without the store, on chunked data (hdf5 engine): read the rows of this many planned batches in one "
          "pass in chunk order, each chunk decompressed once per pass (0: off)",
          [](auto& o) -> auto& { return o.lookahead; }, 0),
  };
  // One default: LoaderOptions{}'s own value, as text.
  const LoaderOptions defaults;
  for (LoaderOption& option : table) option.default_text = option.get(defaults);
  return table;
}

}  // namespace

void detail::check_prefetch_option(std::int64_t depth) {
  if (depth < 0 || depth > kMaxPrefetchDepth)
    STRIDER_THROW(UsageError, "--prefetch must be in 0.." + std::to_string(kMaxPrefetchDepth) + " (0: auto), got " +
                                  std::to_string(depth));
}

void detail::check_option_at_least(std::string_view name, std::int64_t value, std::int64_t minimum) {
  if (value < minimum)
    STRIDER_THROW(UsageError, "--" + std::string(name) + " must be >= " + std::to_string(minimum) + ", got " +
                                  std::to_string(value));
}

const std::vector<LoaderOption>& loader_option_table() {
  static const std::vector<LoaderOption> table = build_table();
  return table;
}

const LoaderOption& loader_option(std::string_view name) {
  std::vector<std::string> names;
  for (const LoaderOption& option : loader_option_table()) {
    if (option.name == name) return option;
    names.push_back(option.name);
  }
  const std::string near = nearest_name(name, names);
  STRIDER_THROW(UsageError, "unknown option '--" + std::string(name) + "'" +
                                (near.empty() ? "" : "; did you mean '--" + near + "'?"));
}

void set_loader_option(LoaderOptions& options, std::string_view name, std::string_view text) {
  loader_option(name).set(options, text);
}

}  // namespace strider
