#pragma once
/// \file
/// The parts of the extension module strider._strider, each registered by one function from the
/// module's init (module.cpp). Every function is called once, with the GIL held.

#include <pybind11/pybind11.h>

namespace strider::python {

namespace py = pybind11;

/// strider.Error, UsageError and DataError, and the translation of C++ errors into them.
void bind_errors(py::module_& module);
/// MPI for the module: starting it when nobody did, the world, aborting the job, the exit hook.
void bind_runtime(py::module_& module);
/// loader_options(): the shared option table as Python sees it.
void bind_options(py::module_& module);
/// Loader, its epochs and batches.
void bind_loader(py::module_& module);
/// _Plan: one rank's sampler, for the sampler classes of strider/samplers.py.
void bind_plan(py::module_& module);

}  // namespace strider::python
