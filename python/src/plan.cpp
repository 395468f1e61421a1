// _Plan: one rank's sampler of any mode, built from the sampling options of the shared table, for
// the torch-style sampler classes of strider/samplers.py. Pure: no MPI, no file.
#include <pybind11/numpy.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "keywords.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/factory.hpp"

namespace strider::python {

namespace {

struct PyPlan {
  std::unique_ptr<Sampler> sampler;  // borrows nothing: the options hold labels and lengths
};

/// One value per sample (labels or lengths) from any sequence of ints; None stays null. Each value
/// must lie in [0, T's maximum]. Floats and bools raise TypeError rather than being truncated to ints
/// (as the Loader refuses labels of another type in a file).
template <typename T>
std::shared_ptr<const std::vector<T>> per_sample(const py::object& values, std::int64_t size, const std::string& what) {
  if (values.is_none()) return nullptr;
  const py::array as_given = py::array::ensure(values);  // numpy's own dtype for it: a list of ints is int64
  if (as_given && as_given.size() > 0 && as_given.dtype().kind() != 'i' && as_given.dtype().kind() != 'u')
    throw py::type_error(what + " must hold integers, got dtype " + std::string(py::str(as_given.dtype())) +
                         " (numpy.asarray(" + what + ").dtype)");
  const auto array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(values);
  if (!array || array.ndim() != 1) STRIDER_THROW(UsageError, what + " must be a sequence of ints, one per sample");
  if (array.size() != size)
    STRIDER_THROW(UsageError,
                  what + " has " + std::to_string(array.size()) + " entries for " + std::to_string(size) + " samples");
  auto result = std::make_shared<std::vector<T>>(static_cast<std::size_t>(size));
  for (py::ssize_t i = 0; i < array.size(); ++i) {
    const std::int64_t value = array.data()[i];
    if (value < 0 || static_cast<std::uint64_t>(value) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      STRIDER_THROW(UsageError, what + " must be >= 0 (and fit " + std::to_string(sizeof(T) * 8) + " bits), got " +
                                    std::to_string(value) + " at " + std::to_string(i));
    (*result)[static_cast<std::size_t>(i)] = static_cast<T>(value);
  }
  return result;
}

py::array_t<std::int64_t> to_array(const std::vector<std::int64_t>& values) {
  py::array_t<std::int64_t> array(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

}  // namespace

void bind_plan(py::module_& module) {
  py::class_<PyPlan>(module, "_Plan",
                     "One rank's plan of any sampling mode (the library's sampler); the sampler classes wrap it.")
      .def(py::init([](std::int64_t dataset_size, int world_size, int rank, const py::object& labels,
                       const py::object& lengths, const py::kwargs& keywords) {
             LoaderOptions options;
             set_options_from_keywords(options, keywords, "sampling");
             SamplerOptions sampling = options.sampler;
             if (dataset_size < 0)
               STRIDER_THROW(UsageError, "the dataset size must be >= 0, got " + std::to_string(dataset_size));
             sampling.dataset_size = dataset_size;
             sampling.seed = options.seed.value_or(0);
             sampling.labels = per_sample<std::int32_t>(labels, dataset_size, "labels");
             sampling.lengths = per_sample<std::int64_t>(lengths, dataset_size, "lengths");
             return PyPlan{make_sampler(sampling, world_size, rank)};
           }),
           py::arg("dataset_size"), py::arg("world_size"), py::arg("rank"), py::kw_only(),
           py::arg("labels") = py::none(), py::arg("lengths") = py::none())
      .def(
          "set_epoch",
          [](PyPlan& plan, std::int64_t epoch) {
            if (epoch < 0) STRIDER_THROW(UsageError, "epoch must be >= 0, got " + std::to_string(epoch));
            py::gil_scoped_release release;
            plan.sampler->set_epoch(epoch);
          },
          py::arg("epoch"))
      .def_property_readonly("epoch", [](const PyPlan& plan) { return plan.sampler->epoch(); })
      .def_property_readonly("mode", [](const PyPlan& plan) { return plan.sampler->mode(); })
      .def_property_readonly("num_steps", [](const PyPlan& plan) { return plan.sampler->num_steps(); })
      .def_property_readonly("global_batch_size", [](const PyPlan& plan) { return plan.sampler->global_batch_size(); })
      .def_property_readonly("config_hash", [](const PyPlan& plan) { return plan.sampler->config_hash(); })
      .def(
          "batch",
          [](const PyPlan& plan, std::int64_t step) {
            std::vector<std::int64_t> indices;
            plan.sampler->batch(step, indices);
            return to_array(indices);
          },
          py::arg("step"), "int64 global indices of this rank's batch at `step`")
      .def(
          "indices",
          [](const PyPlan& plan, std::int64_t first_step) {
            std::vector<std::int64_t> all, batch;
            {
              py::gil_scoped_release release;
              for (std::int64_t step = first_step; step < plan.sampler->num_steps(); ++step) {
                plan.sampler->batch(step, batch);
                all.insert(all.end(), batch.begin(), batch.end());
              }
            }
            return to_array(all);
          },
          py::arg("first_step") = 0, "int64: this rank's batches from first_step to the end, back to back")
      .def(
          "state",
          [](const PyPlan& plan, std::int64_t steps_done) { return plan.sampler->state(steps_done).serialize(); },
          py::arg("steps_done"), "the state line after steps_done steps of the current epoch")
      .def(
          "resume",
          [](PyPlan& plan, const std::string& text) { return plan.sampler->resume(SamplerState::parse(text)); },
          py::arg("state"), "checks a state line against this plan, sets its epoch and returns the step to go on from");
}

}  // namespace strider::python
