// strider.Loader, its epochs and its batches. A batch's arrays are numpy views of the ring's memory
// whose base is the Batch object, which holds the ring slot and the Loader: a view never outlives
// its memory, and the slot returns to the ring when the Batch and every view of it are gone. The
// views are writable: the slot is this process's own and this batch's alone until it returns, so
// torch.from_numpy takes them without a warning and numpy's __dlpack__ exports them (to
// torch.from_dlpack, JAX) without a copy. Calls that wait (construction, epoch starts, the next
// batch, close) release the GIL.
#include <pybind11/numpy.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "keywords.hpp"
#include "loader_core.hpp"
#include "runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/device/pinned_allocator.hpp"

namespace strider::python {

namespace {

/// Throws UsageError in a forked child of the process that created the Loader: its threads are not
/// there, so reading or planning would wait for them forever.
void check_creating_process(const LoaderCore& core) {
  if (!core.in_forked_child()) return;
  STRIDER_THROW(UsageError, "this Loader was created in process " + std::to_string(core.creator_pid) +
                                " and cannot be used in a forked child (a DataLoader with num_workers > 0 forks): "
                                "use num_workers=0 (the Loader reads ahead on threads of its own)");
}

/// While a batch is awaited with the GIL released: Ctrl-C (any signal whose Python handler raises)
/// raises at once rather than after the read.
void raise_pending_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

/// Runs `body` with the GIL released and the core's mutex held (in that order, so that no thread
/// waits for the GIL while it holds the mutex). Throws UsageError in a forked child.
template <typename Body>
auto locked(LoaderCore& core, Body&& body) -> decltype(body()) {
  check_creating_process(core);
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(core.mutex);
  return body();
}

py::dtype dtype_of(ElementType type) {
  switch (type) {
    case ElementType::int8:
      return py::dtype::of<std::int8_t>();
    case ElementType::uint8:
      return py::dtype::of<std::uint8_t>();
    case ElementType::int16:
      return py::dtype::of<std::int16_t>();
    case ElementType::uint16:
      return py::dtype::of<std::uint16_t>();
    case ElementType::int32:
      return py::dtype::of<std::int32_t>();
    case ElementType::uint32:
      return py::dtype::of<std::uint32_t>();
    case ElementType::int64:
      return py::dtype::of<std::int64_t>();
    case ElementType::uint64:
      return py::dtype::of<std::uint64_t>();
    case ElementType::float16:
      return py::dtype("float16");  // IEEE binary16, as strider checks the file's type field by field
    case ElementType::float32:
      return py::dtype::of<float>();
    case ElementType::float64:
      break;
  }
  return py::dtype::of<double>();
}

/// A writable array over `data` (C order, memory of a ring slot that only this batch uses) that
/// keeps `base` alive.
py::array slot_view(const py::dtype& dtype, std::vector<py::ssize_t> shape, const void* data, py::handle base) {
  return py::array(dtype, std::move(shape), std::vector<py::ssize_t>{}, data, base);
}

/// A new array holding a copy of `data`.
py::array owned_copy(const py::dtype& dtype, std::vector<py::ssize_t> shape, const void* data) {
  py::array array(dtype, std::move(shape));
  if (array.nbytes() > 0) std::memcpy(array.mutable_data(), data, static_cast<std::size_t>(array.nbytes()));
  return array;
}

/// One batch: views of a ring slot, or (copy=True) arrays of its own.
struct PyBatch {
  std::shared_ptr<LoaderCore> core;  // the Loader and its ring; declared first, so released last
  Batch batch;                       // the ring slot (views); empty when copied
  const DatasetInfo* info = nullptr;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t size = 0;
  bool copied = false;
  py::object samples, labels, indices, offsets;  // copy=True: the arrays
  ~PyBatch() {
    // In a forked child the ring is not this process's to return the slot to (its lock may be held).
    if (core && core->in_forked_child()) static_cast<void>(new Batch(std::move(batch)));
  }
};

/// The arrays of a batch: which one, its dtype, shape and data.
enum class Part { samples, tokens, labels, indices, offsets };

struct PartLayout {
  py::dtype dtype;
  std::vector<py::ssize_t> shape;
  const void* data = nullptr;
};

std::optional<PartLayout> layout_of(const DatasetInfo& info, const Batch& batch, Part part) {
  const auto count = static_cast<py::ssize_t>(batch.size());
  switch (part) {
    case Part::samples: {
      if (info.variable_length) return std::nullopt;
      std::vector<py::ssize_t> shape{count};
      for (std::int64_t extent : info.sample_shape) shape.push_back(static_cast<py::ssize_t>(extent));
      return PartLayout{dtype_of(info.element_type), std::move(shape), batch.samples()};
    }
    case Part::tokens: {
      if (!info.variable_length) return std::nullopt;
      const auto tokens =
          static_cast<py::ssize_t>(batch.samples_bytes() / static_cast<std::int64_t>(element_bytes(info.element_type)));
      return PartLayout{dtype_of(info.element_type), {tokens}, batch.samples()};
    }
    case Part::labels:
      if (batch.labels() == nullptr) return std::nullopt;
      return PartLayout{py::dtype::of<std::int32_t>(), {count}, batch.labels()};
    case Part::indices:
      return PartLayout{py::dtype::of<std::int64_t>(), {count}, batch.indices().data()};
    case Part::offsets:
      if (batch.offsets() == nullptr) return std::nullopt;
      return PartLayout{py::dtype::of<std::int64_t>(), {count + 1}, batch.offsets()};
  }
  return std::nullopt;
}

py::object make_batch(const std::shared_ptr<LoaderCore>& core, Batch batch) {
  auto result = std::make_unique<PyBatch>();
  result->core = core;
  result->info = &core->loader->dataset();
  result->epoch = batch.epoch();
  result->step = batch.step();
  result->size = batch.size();
  if (core->copy) {
    const auto copy = [&](Part part) -> py::object {
      std::optional<PartLayout> layout = layout_of(*result->info, batch, part);
      if (!layout) return py::none();
      return owned_copy(layout->dtype, std::move(layout->shape), layout->data);
    };
    result->samples = copy(result->info->variable_length ? Part::tokens : Part::samples);
    result->labels = copy(Part::labels);
    result->indices = copy(Part::indices);
    result->offsets = copy(Part::offsets);
    result->copied = true;
    batch.release();
  } else {
    result->batch = std::move(batch);
  }
  return py::cast(std::move(result));
}

/// A part of a batch as a view (whose base is the Batch object `self`) or as its copy.
py::object batch_part(const py::object& self, Part part) {
  PyBatch& batch = self.cast<PyBatch&>();
  if (batch.copied) {
    switch (part) {
      case Part::samples:
        return batch.info->variable_length ? py::none() : batch.samples;
      case Part::tokens:
        return batch.info->variable_length ? batch.samples : py::none();
      case Part::labels:
        return batch.labels;
      case Part::indices:
        return batch.indices;
      case Part::offsets:
        return batch.offsets;
    }
  }
  std::optional<PartLayout> layout = layout_of(*batch.info, batch.batch, part);
  if (!layout) return py::none();
  return slot_view(layout->dtype, std::move(layout->shape), layout->data, self);
}

/// One epoch being read: an iterator of Batch objects.
struct PyEpoch {
  std::shared_ptr<LoaderCore> core;
  std::optional<LoaderEpoch> epoch;
  std::uint64_t serial = 0;
  bool done = false;
  bool failed = false;  // next() raised: the epoch stopped there
  ~PyEpoch() {
    if (!epoch || !core) return;
    if (core->in_forked_child())  // its reads are the parent's: left to it
      static_cast<void>(new LoaderEpoch(std::move(*epoch)));
    else
      locked(*core, [&] { epoch.reset(); });  // stops its reads if it still runs
  }
};

struct PyLoader {
  std::shared_ptr<LoaderCore> core;
};

/// drop_last is torch's DistributedSampler's (drop the dataset's tail so that every rank gets as
/// many samples); a DataLoader user may mean the DataLoader's (drop the last partial batch), which
/// is drop_last_batch. Said once per process, on rank 0 of the Loader's communicator.
void warn_drop_last_once(MPI_Comm parent) {
  static bool warned = false;
  int rank = 0;
  MPI_Comm_rank(parent, &rank);
  if (warned || rank != 0) return;
  warned = true;
  if (PyErr_WarnEx(PyExc_UserWarning,
                   "drop_last=True drops the dataset's tail so that every rank gets as many samples "
                   "(DistributedSampler's drop_last); to drop a last partial batch (DataLoader's drop_last) "
                   "pass drop_last_batch=True",
                   1) != 0)
    throw py::error_already_set();
}

LoaderSplit split_of(const std::string& split) {
  if (split == "sampler") return LoaderSplit::sampler;
  if (split == "exact") return LoaderSplit::exact;
  STRIDER_THROW(UsageError, "split must be 'sampler' or 'exact', got '" + split + "'");
}

/// Collective: the communicator, the options (agreed: a bad keyword on one rank fails every rank),
/// then the Loader.
std::shared_ptr<LoaderCore> open_loader(const py::object& data, const py::object& comm, bool copy,
                                        const std::string& split, bool pin_memory, const py::kwargs& keywords) {
  ensure_mpi();
  const MPI_Comm parent = communicator_from_python(comm);
  LoaderOptions options;
  std::exception_ptr failure;
  try {
    py::dict all = keywords;
    all["data"] = data;
    set_options_from_keywords(options, all);
    options.split = split_of(split);
    if (pin_memory) {
      const GpuProbe gpus = probe_gpus();
      if (gpus.device_count == 0)
        STRIDER_THROW(UsageError, "pin_memory=True page-locks the ring through CUDA, and there is no usable GPU (" +
                                      gpus.reason + "): leave pin_memory off");
      options.allocator = make_pinned_allocator();
    }
    if (options.sampler.drop_last) warn_drop_last_once(parent);
  } catch (const py::error_already_set& error) {
    failure = std::make_exception_ptr(UsageError(error.what(), __FILE__, __LINE__));
  } catch (...) {
    failure = std::current_exception();
  }
  auto core = std::make_shared<LoaderCore>();
  core->copy = copy;
  {
    py::gil_scoped_release release;
    arrive_together(parent, "the Loader's construction");  // a Loader made on some ranks only: warned
    core->comm = std::make_unique<Communicator>(Communicator::duplicate(parent));
    core->comm->agree(failure);
    core->loader = std::make_unique<Loader>(*core->comm, std::move(options));
  }
  track_open_loader(core);
  return core;
}

/// Not collective. A Loader with the in-memory store stays tracked: its store's teardown is
/// collective, so it is destroyed at exit, which every rank reaches, never by the garbage collector.
/// In a forked child: nothing (the Loader is its creator's to close).
void close_loader(LoaderCore& core) {
  if (core.in_forked_child()) return;
  locked(core, [&] { core.loader->close(); });
  if (core.loader->store() == nullptr) forget_loader(&core);
}

/// In a forked child: nothing.
void abandon_loader(LoaderCore& core) {
  if (core.in_forked_child()) return;
  locked(core, [&] { core.loader->abandon(); });
  forget_loader(&core);
}

std::unique_ptr<PyEpoch> start_epoch(const std::shared_ptr<LoaderCore>& core, std::int64_t epoch) {
  auto result = std::make_unique<PyEpoch>();
  result->core = core;
  locked(*core, [&] {
    result->epoch.emplace(core->loader->epoch(epoch));
    core->current_epoch = epoch;
    core->at_epoch_start = false;
    result->serial = ++core->serial;
  });
  return result;
}

py::object next_batch(PyEpoch& self) {
  LoaderCore& core = *self.core;
  if (self.failed)
    STRIDER_THROW(UsageError, "epoch " + std::to_string(self.epoch->epoch()) +
                                  " stopped at an error; start it again with loader.epoch()");
  std::optional<Batch> batch;
  if (!self.done) {
    batch = locked(core, [&] {
      std::optional<Batch> next;
      try {
        next = self.epoch->next(raise_pending_signals);
      } catch (...) {
        self.failed = true;
        throw;
      }
      if (!next) {
        self.done = true;
        if (self.serial == core.serial) {  // the loader's position moves on to the next epoch
          core.current_epoch = self.epoch->epoch() + 1;
          core.at_epoch_start = true;
        }
      }
      return next;
    });
  }
  if (!batch) throw py::stop_iteration();
  return make_batch(self.core, std::move(*batch));
}

py::dict state_dict(LoaderCore& core) {
  const SamplerState state = locked(core, [&] {
    SamplerState position = core.loader->state();
    if (core.at_epoch_start) {
      position.epoch = core.current_epoch;
      position.consumed = 0;
    }
    return position;
  });
  py::dict result;
  result["epoch"] = state.epoch;
  result["consumed"] = state.consumed;
  result["strider"] = state.serialize();
  return result;
}

void load_state_dict(LoaderCore& core, const py::dict& state) {
  if (!state.contains("strider"))
    STRIDER_THROW(UsageError, "not a strider Loader state (no 'strider' entry): pass what state_dict() returned");
  const SamplerState saved = SamplerState::parse(py::str(state["strider"]).cast<std::string>());
  locked(core, [&] {
    core.loader->resume(saved);
    core.current_epoch = saved.epoch;
    core.at_epoch_start = false;
    ++core.serial;
  });
}

py::tuple tuple_of(const std::vector<std::int64_t>& values) {
  py::tuple result(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) result[i] = values[i];
  return result;
}

py::dict dataset_dict(const Loader& loader) {
  const DatasetInfo& info = loader.dataset();
  py::dict result;
  result["path"] = loader.options().data_path;
  result["num_samples"] = info.num_samples;
  result["variable_length"] = info.variable_length;
  result["sample_shape"] = tuple_of(info.sample_shape);
  result["dtype"] = dtype_of(info.element_type);
  result["sample_bytes"] = info.sample_bytes;
  result["num_tokens"] = info.num_tokens;
  result["has_labels"] = info.has_labels;
  result["layout"] = info.layout;
  result["chunk_shape"] = tuple_of(info.chunk_shape);
  result["compressed"] = info.compressed;
  result["compression"] = info.compression;
  return result;
}

py::dict stats_dict(const PrefetchStats& stats) {
  py::dict result;
  result["stall_seconds"] = stats.stall_seconds;
  result["wall_seconds"] = stats.wall_seconds;
  result["io_seconds"] = stats.io_seconds;
  result["time_to_first_batch_seconds"] = stats.time_to_first_batch_seconds;
  result["bytes_read"] = stats.bytes_read;
  result["useful_bytes"] = stats.useful_bytes;
  result["batches"] = stats.batches;
  result["samples"] = stats.samples;
  result["read_calls"] = stats.read_calls;
  result["stall_fraction"] = stats.stall_fraction();
  return result;
}

const std::string& loader_doc() {
  static const std::string doc =
      "Loader(data, *, comm=None, copy=False, split='sampler', **options)\n\n"
      "strider's pipeline for one dataset file: the reader, the sampler and the prefetcher.\n"
      "Collective over comm (an mpi4py communicator; None: MPI_COMM_WORLD): every rank builds it with\n"
      "the same options, and a bad option or file on any rank raises the same strider.Error on every\n"
      "rank. Close it with close() (this rank's files: not collective) or `with strider.Loader(...) as\n"
      "loader:`; a loader left open is closed at exit, and the in-memory store is freed there.\n\n"
      "    for batch in loader.epoch(e):        # or: loader.set_epoch(e); for batch in loader\n"
      "        x, y = batch                          # numpy views of the ring, no copy\n"
      "        x = torch.from_dlpack(x)              # a tensor of the same memory (or torch.from_numpy)\n\n"
      "A batch and its arrays hold one buffer of the ring (prefetch buffers per rank): keeping more\n"
      "than that raises strider.UsageError instead of waiting; copy=True gives arrays of their own.\n"
      "split='exact' reads every sample once (evaluation; ranks may get different step counts).\n"
      "pin_memory=True page-locks the ring through CUDA (strider built with CUDA), so that\n"
      "tensor.to('cuda', non_blocking=True) copies asynchronously; refused in a build without CUDA.\n"
      "drop_last is DistributedSampler's (the dataset's tail); DataLoader's is drop_last_batch.\n"
      "A forked child (a DataLoader worker with num_workers > 0) cannot use a Loader of its parent: it\n"
      "raises strider.UsageError there; use num_workers=0 (it reads ahead on threads of its own).\n\n"
      "Options (the apps' --name with '_' for '-', the same defaults; None keeps the default):\n" +
      keywords_doc();
  return doc;
}

}  // namespace

void bind_loader(py::module_& module) {
  py::class_<PyBatch, std::unique_ptr<PyBatch>>(
      module, "Batch",
      "One batch of this rank: numpy views of a ring buffer that is this batch's alone (or copies with "
      "copy=True). torch.from_numpy and torch.from_dlpack take them without a copy. The buffer returns to the "
      "ring when the Batch and every array or tensor of it are gone. `x, y = batch` unpacks the inputs and the "
      "labels.")
      .def_property_readonly(
          "samples", [](py::object self) { return batch_part(self, Part::samples); },
          "fixed-size samples [n, *sample_shape] of the file's dtype (None for sequences)")
      .def_property_readonly(
          "tokens", [](py::object self) { return batch_part(self, Part::tokens); },
          "sequences: every row's tokens back to back [offsets[-1]] (None for fixed-size samples)")
      .def_property_readonly(
          "offsets", [](py::object self) { return batch_part(self, Part::offsets); },
          "sequences: int64 [n+1], row i is tokens[offsets[i]:offsets[i+1]] (None for fixed-size samples)")
      .def_property_readonly(
          "labels", [](py::object self) { return batch_part(self, Part::labels); },
          "int32 [n] (None when the file has no labels)")
      .def_property_readonly(
          "indices", [](py::object self) { return batch_part(self, Part::indices); },
          "int64 [n]: the samples' global indices, in batch order")
      .def_property_readonly(
          "epoch", [](const PyBatch& batch) { return batch.epoch; }, "the epoch")
      .def_property_readonly(
          "step", [](const PyBatch& batch) { return batch.step; }, "the step within the epoch")
      .def("__len__", [](const PyBatch& batch) { return batch.size; })
      .def(
          "__iter__",
          [](py::object self) {
            const bool sequences = self.cast<PyBatch&>().info->variable_length;
            py::object inputs =
                sequences ? py::object(py::make_tuple(batch_part(self, Part::tokens), batch_part(self, Part::offsets)))
                          : batch_part(self, Part::samples);
            return py::iter(py::make_tuple(inputs, batch_part(self, Part::labels)));
          },
          "`x, y = batch`: (samples, labels) for fixed-size samples, ((tokens, offsets), labels) for sequences; "
          "labels is None when the file has none.")
      .def("__repr__", [](const PyBatch& batch) {
        return "<strider.Batch epoch " + std::to_string(batch.epoch) + " step " + std::to_string(batch.step) + ", " +
               std::to_string(batch.size) + " samples" + (batch.copied ? ", copied>" : ">");
      });

  py::class_<PyEpoch, std::unique_ptr<PyEpoch>>(
      module, "Epoch",
      "One epoch of a Loader: an iterator of Batch objects in plan order. Waiting for a batch releases the GIL; "
      "a read error raises on this rank only.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &next_batch)
      .def("__len__",
           [](const PyEpoch& self) { return self.epoch ? self.epoch->end_step() - self.epoch->first_step() : 0; })
      .def_property_readonly(
          "epoch", [](const PyEpoch& self) { return self.epoch->epoch(); }, "the epoch")
      .def_property_readonly(
          "first_step", [](const PyEpoch& self) { return self.epoch->first_step(); },
          "the first step it yields (not 0 after load_state_dict)")
      .def_property_readonly(
          "end_step", [](const PyEpoch& self) { return self.epoch->end_step(); }, "one past the last step");

  py::class_<PyLoader>(module, "Loader", loader_doc().c_str())
      .def(py::init([](const py::object& data, const py::object& comm, bool copy, const std::string& split,
                       bool pin_memory, const py::kwargs& keywords) {
             return PyLoader{open_loader(data, comm, copy, split, pin_memory, keywords)};
           }),
           py::arg("data"), py::kw_only(), py::arg("comm") = py::none(), py::arg("copy") = false,
           py::arg("split") = "sampler", py::arg("pin_memory") = false)
      .def(
          "epoch", [](PyLoader& self, std::int64_t epoch) { return start_epoch(self.core, epoch); }, py::arg("epoch"),
          "Collective: starts epoch `epoch` (after load_state_dict, at the saved step) and returns its Epoch.")
      .def(
          "__iter__", [](PyLoader& self) { return start_epoch(self.core, self.core->current_epoch); },
          "Collective: epoch(current_epoch).")
      .def(
          "__len__",
          [](PyLoader& self) {
            LoaderCore& core = *self.core;
            return locked(core, [&] { return core.loader->steps(core.current_epoch); });
          },
          "Steps of current_epoch on this rank.")
      .def(
          "steps",
          [](PyLoader& self, std::int64_t epoch) {
            return locked(*self.core, [&] { return self.core->loader->steps(epoch); });
          },
          py::arg("epoch"), "Steps of epoch `epoch` on this rank (bucketed epochs differ in length).")
      .def(
          "set_epoch",
          [](PyLoader& self, std::int64_t epoch) {
            if (epoch < 0) STRIDER_THROW(UsageError, "epoch must be >= 0, got " + std::to_string(epoch));
            LoaderCore& core = *self.core;
            locked(core, [&] {
              core.current_epoch = epoch;
              core.at_epoch_start = true;
            });
          },
          py::arg("epoch"), "The epoch that iter(loader) runs next (torch's sampler.set_epoch).")
      .def_property_readonly(
          "current_epoch", [](PyLoader& self) { return self.core->current_epoch; },
          "The epoch iter(loader) runs: set by set_epoch() and load_state_dict(), and one more after an epoch "
          "is read to its end (so that forgetting set_epoch never repeats an epoch's order).")
      .def(
          "state_dict", [](PyLoader& self) { return state_dict(*self.core); },
          "Where the loader stands, after every batch yielded so far (torchdata's StatefulDataLoader "
          "convention): {'epoch', 'consumed', 'strider'}. After an epoch ends, the start of the next.")
      .def(
          "load_state_dict", [](PyLoader& self, const py::dict& state) { load_state_dict(*self.core, state); },
          py::arg("state"),
          "Makes the next epoch(state['epoch']) (and iter(loader)) start where state_dict() was taken. Raises "
          "UsageError for a state of another dataset, sampler, seed or global batch.")
      .def(
          "stats",
          [](PyLoader& self) { return stats_dict(locked(*self.core, [&] { return self.core->loader->stats(); })); },
          "This rank's prefetch counters as a dict (stall_fraction = stall_seconds / wall_seconds).")
      .def(
          "reset_stats", [](PyLoader& self) { locked(*self.core, [&] { self.core->loader->reset_stats(); }); },
          "Starts the counters again.")
      .def(
          "options",
          [](PyLoader& self) {
            py::dict result;
            for (const LoaderOption& option : loader_option_table())
              result[py::str(keyword_of(option.name))] = option_value(option, option.get(self.core->loader->options()));
            return result;
          },
          "The options in force by keyword (the seed filled in), as Loader(**options) takes them.")
      .def(
          "labels",
          [](PyLoader& self) -> py::object {
            LoaderCore& core = *self.core;
            if (!core.loader->dataset().has_labels) return py::none();
            std::vector<std::int32_t> labels = locked(core, [&] {
              std::vector<std::int32_t> all = core.loader->labels().to_vector();
              if (all.empty()) {  // read per batch: from the file, between epochs
                all.resize(static_cast<std::size_t>(core.loader->dataset().num_samples));
                core.loader->read_labels(0, static_cast<std::int64_t>(all.size()), all.data());
              }
              return all;
            });
            return owned_copy(py::dtype::of<std::int32_t>(), {static_cast<py::ssize_t>(labels.size())}, labels.data());
          },
          "Every label of the dataset (int32 [N], a copy), None without labels. Where they are not held in "
          "memory they are read from the file, which works only between epochs. Not collective.")
      .def_property_readonly(
          "dataset", [](PyLoader& self) { return dataset_dict(*self.core->loader); },
          "What the file holds: num_samples, sample_shape, dtype, variable_length, num_tokens, has_labels, ...")
      .def_property_readonly(
          "engine", [](PyLoader& self) { return self.core->loader->engine(); }, "hdf5, direct or mmap")
      .def_property_readonly(
          "seed", [](PyLoader& self) { return self.core->loader->seed(); }, "the agreed seed")
      .def_property_readonly(
          "prefetch_depth", [](PyLoader& self) { return self.core->loader->prefetch_depth(); },
          "buffers in the ring: the most batches a caller can hold")
      .def_property_readonly(
          "rank", [](PyLoader& self) { return self.core->comm->rank(); }, "this rank in comm")
      .def_property_readonly(
          "world_size", [](PyLoader& self) { return self.core->comm->size(); }, "ranks in comm")
      .def_property_readonly(
          "closed", [](PyLoader& self) { return self.core->loader->closed(); }, "whether close() ran")
      .def(
          "close", [](PyLoader& self) { close_loader(*self.core); },
          "Not collective: closes this rank's files (the in-memory store is freed at exit, collectively). Batches "
          "still held stay valid. Again, or in a forked child: nothing.")
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](PyLoader& self, const py::object& type, const py::object& value, const py::object&) {
            // An error raised on every rank of this loader leaves every rank here: close together.
            // Any other error may be on this rank alone: leave the file to the end of the process.
            const bool everywhere =
                type.is_none() || (py::hasattr(value, "ranks_agreed") &&
                                   py::int_(value.attr("ranks_agreed")).cast<int>() == self.core->comm->size());
            if (everywhere)
              close_loader(*self.core);
            else
              abandon_loader(*self.core);
            return false;
          },
          "Closes the loader; with an exception raised on this rank only, leaves its store without a "
          "collective.")
      .def("__repr__", [](PyLoader& self) {
        const LoaderOptions& options = self.core->loader->options();
        return "<strider.Loader " + options.data_path + " " + options.sampler.mode +
               " batch_size=" + std::to_string(options.sampler.batch_size) + " rank " +
               std::to_string(self.core->comm->rank()) + " of " + std::to_string(self.core->comm->size()) +
               (self.core->loader->closed() ? ", closed>" : ">");
      });
}

}  // namespace strider::python
