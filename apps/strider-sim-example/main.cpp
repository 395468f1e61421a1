// strider-sim-example: the template for a simulation code that trains a model as it runs. A time-step
// loop alternates simulation steps (heat diffusion on each rank's slice of a 1-D rod, with halo
// exchange) with training steps fed by a strider::Loader. Only strider's public API is used; copy
// this file and replace the simulation and the model with your own.
//   mpirun -np 4 strider-sim-example --data train.h5 --steps 200 --train-every 4
// The pieces, in order: 1. MPI and strider's communicator; 2. a backend for the model (CPU here, CUDA
// where a GPU works); 3. the Loader (seed, file, plan, read-ahead); 4. the model, shaped by the data.

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <vector>

#include "strider/comm/mpi_runtime.hpp"
#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/device/backend.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/io/hdf5_handle.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/train/batch_input.hpp"
#include "strider/train/model.hpp"

namespace {

/// The "simulation": explicit heat diffusion on this rank's cells of a rod, ends held at zero.
class HeatRod {
 public:
  HeatRod(const strider::Communicator& comm, std::size_t cells) : comm_(comm), heat_(cells + 2, 0.0) {
    for (std::size_t i = 1; i <= cells; ++i) {  // a hot spot in the middle of the global rod
      const double x = static_cast<double>(comm.rank() * cells + i - 1) / static_cast<double>(comm.size() * cells);
      heat_[i] = std::exp(-200.0 * (x - 0.5) * (x - 0.5));
    }
  }

  /// One time step: exchange halos with the neighbours, then update.
  void step() {
    const int left = comm_.rank() > 0 ? comm_.rank() - 1 : MPI_PROC_NULL;
    const int right = comm_.rank() + 1 < comm_.size() ? comm_.rank() + 1 : MPI_PROC_NULL;
    const std::size_t n = heat_.size() - 2;
    MPI_Sendrecv(&heat_[1], 1, MPI_DOUBLE, left, 0, &heat_[n + 1], 1, MPI_DOUBLE, right, 0, comm_.native(),
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&heat_[n], 1, MPI_DOUBLE, right, 1, &heat_[0], 1, MPI_DOUBLE, left, 1, comm_.native(),
                 MPI_STATUS_IGNORE);
    std::vector<double> next = heat_;
    for (std::size_t i = 1; i <= n; ++i) next[i] += 0.25 * (heat_[i - 1] - 2 * heat_[i] + heat_[i + 1]);
    heat_.swap(next);
  }

  double total_heat() const {  // collective: the total heat of the rod
    return comm_.all_reduce(std::accumulate(heat_.begin() + 1, heat_.end() - 1, 0.0), strider::ReduceOp::sum);
  }

 private:
  const strider::Communicator& comm_;
  std::vector<double> heat_;
};

int run(strider::Communicator& comm, int argc, char** argv) {
  namespace po = boost::program_options;
  int steps = 200, train_every = 4;
  // --help lists the options in groups, as strider's own apps do.
  po::options_description input("Input"), sampling("Sampling"), simulation("Simulation"), general("General");
  input.add_options()("data", po::value<std::string>()->required(), strider::loader_option("data").help.c_str());
  sampling.add_options()("batch-size",
                         po::value<std::string>()->default_value(strider::loader_option("batch-size").default_text),
                         strider::loader_option("batch-size").help.c_str());
  simulation.add_options()("steps", po::value(&steps)->default_value(steps), "simulation time steps")(
      "train-every", po::value(&train_every)->default_value(train_every), "one training step every N simulation steps");
  general.add_options()("help", "this help")("version", "print strider's version and exit")(
      "config", po::value<std::string>(),
      "read further options from FILE (lines 'name = value'; the command line wins)");
  po::options_description options("strider-sim-example: a simulation that trains as it runs");
  options.add(input).add(sampling).add(simulation).add(general);
  po::variables_map values;
  strider::LoaderOptions loading;  // --data and --batch-size: strider's shared options, with its help
  comm.collective_try([&] {        // every rank parses; a bad option ends all ranks with one line
    try {
      po::store(po::parse_command_line(argc, argv, options), values);
      if (values.count("help") || values.count("version")) return;
      if (values.count("config")) {  // a job's settings in a file; what the command line gave stays
        const std::string path = values["config"].as<std::string>();
        std::ifstream file(path);
        if (!file) STRIDER_THROW(strider::UsageError, "--config " + path + ": cannot read it");
        po::store(po::parse_config_file(file, options), values);
      }
      po::notify(values);
    } catch (const po::error& error) {
      STRIDER_THROW(strider::UsageError, std::string(error.what()) + " (see --help)");
    }
    for (const char* name : {"data", "batch-size"})
      strider::set_loader_option(loading, name, values[name].as<std::string>());
    if (train_every < 1) STRIDER_THROW(strider::UsageError, "--train-every must be >= 1");
  });
  if (values.count("help")) {
    if (comm.is_root()) std::cout << options << std::endl;
    return 0;
  }
  if (values.count("version")) {
    if (comm.is_root())
      std::cout << "strider-sim-example (strider) " << STRIDER_VERSION_STRING << "\nbuilt with "
                << strider::gpu_build_versions() << ", " << strider::hdf5_build_version() << ", "
                << strider::mpi_build_version() << std::endl;
    return 0;
  }
  // 2. The backend first: it says where batches should live (pinned memory for a GPU).
  std::unique_ptr<strider::Backend> backend =
      comm.collective_try([&] { return strider::make_backend("auto", comm, nullptr); });
  // 3. The Loader (collective, errors agreed): one seed for everybody, the file opened and checked,
  //    a plan per epoch (torch's DistributedSampler order by default), batches read ahead.
  loading.allocator = backend->host_allocator();
  loading.seed = 42;
  loading.reader.require_labels = true;
  loading.labels_in_memory = true;  // for the class count below
  strider::Loader loader(comm, loading);
  // 4. The model: an MLP on the file's features, the same initial parameters on every rank.
  strider::ModelConfig model;
  const strider::SharedView<std::int32_t> labels = loader.labels();  // held: labels_in_memory
  model.num_classes = 1 + *std::max_element(labels.begin(), labels.end());
  model.seed = loader.seed();
  comm.collective_try([&] { backend->initialize(strider::resolve_model_config(model, loader.dataset())); });
  comm.collective_try([&] { backend->connect(comm); });  // collective: a shared GPU or NCCL failure shows now

  HeatRod rod(comm, 1000);
  std::int64_t epoch = 0, trained = 0;
  strider::LoaderEpoch batches = loader.epoch(epoch);
  double loss_sum = 0;
  for (int t = 1; t <= steps; ++t) {
    rod.step();
    if (t % train_every != 0) continue;
    // A training step: the next batch, forward/backward, gradients all-reduced, SGD. Every rank
    // runs the same number of training steps (the sampler guarantees equal step counts).
    std::optional<strider::Batch> batch = comm.collective_try([&] { return batches.next(); });
    if (!batch) {  // end of the epoch: the next one, in a new order
      batches = loader.epoch(++epoch);
      batch = comm.collective_try([&] { return batches.next(); });
    }
    const strider::StepResult local = backend->forward_backward(strider::batch_input(*batch, loader.dataset()));
    const std::int64_t global_count = comm.all_reduce(local.count, strider::ReduceOp::sum);
    backend->all_reduce_gradients(comm, global_count);
    backend->apply_sgd(0.05f, 0.9f);
    loss_sum += comm.all_reduce(local.loss_sum, strider::ReduceOp::sum);
    trained += global_count;
    if (t % (train_every * 25) != 0) continue;
    const double heat = rod.total_heat();  // collective: every rank takes part
    if (comm.is_root())
      std::cout << "step " << t << ": heat " << heat << ", mean training loss "
                << loss_sum / static_cast<double>(trained) << " over " << trained << " samples" << std::endl;
  }
  loader.close();  // collective
  const double heat = rod.total_heat();
  if (comm.is_root())
    std::cout << "done: " << steps << " simulation steps, " << trained << " samples trained, final heat " << heat
              << ", mean loss " << loss_sum / static_cast<double>(std::max<std::int64_t>(trained, 1)) << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // 1. MPI (MPI_THREAD_MULTIPLE) and strider's communicator; errors end every rank with one line.
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& comm) { return run(comm, argc, argv); });
}
