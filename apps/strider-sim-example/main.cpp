// strider-sim-example: the template for a simulation code that trains a model as it runs.
//
// A time-step loop alternates simulation steps (here: heat diffusion on each rank's slice of a 1-D
// rod, with halo exchange) with training steps fed by strider's pipeline. Only strider's public API
// is used; copy this file and replace the simulation and the model with your own.
//
//   mpirun -np 4 strider-sim-example --data train.h5 --steps 200 --train-every 4
//
// The pieces, in the order a trainer needs them:
//   1. MPI and a communicator of strider's own      (strider/comm/*)
//   2. one seed for everybody                       (agree_on_seed)
//   3. a reader of the shared HDF5 file             (open_reader: collective, errors agreed)
//   4. a sampler: which samples this rank trains on (make_sampler; pure, no MPI)
//   5. a prefetcher that reads ahead in a thread    (Prefetcher)
//   6. a backend holding the model                  (make_backend: CPU here, CUDA where a GPU works)

#include <boost/program_options.hpp>
#include <cmath>
#include <iostream>
#include <vector>

#include "strider/comm/mpi_runtime.hpp"
#include "strider/comm/seed.hpp"
#include "strider/core/error.hpp"
#include "strider/device/backend.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/factory.hpp"
#include "strider/train/model.hpp"

namespace {

/// The "simulation": explicit heat diffusion on this rank's cells of a rod, ends held at zero.
class HeatRod {
 public:
  HeatRod(const strider::Communicator& comm, int cells)
      : comm_(comm), temperature_(static_cast<std::size_t>(cells) + 2, 0.0) {
    // A hot spot in the middle of the global rod.
    for (int i = 1; i <= cells; ++i) {
      const double x = (comm.rank() * cells + i - 1) / static_cast<double>(comm.size() * cells);
      temperature_[static_cast<std::size_t>(i)] = std::exp(-200.0 * (x - 0.5) * (x - 0.5));
    }
  }

  /// One time step: exchange halos with the neighbours, then update.
  void step() {
    const int left = comm_.rank() - 1, right = comm_.rank() + 1;
    const int n = static_cast<int>(temperature_.size()) - 2;
    MPI_Comm comm = comm_.native();
    MPI_Sendrecv(&temperature_[1], 1, MPI_DOUBLE, left >= 0 ? left : MPI_PROC_NULL, 0,
                 &temperature_[static_cast<std::size_t>(n) + 1], 1, MPI_DOUBLE,
                 right < comm_.size() ? right : MPI_PROC_NULL, 0, comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&temperature_[static_cast<std::size_t>(n)], 1, MPI_DOUBLE,
                 right < comm_.size() ? right : MPI_PROC_NULL, 1, &temperature_[0], 1, MPI_DOUBLE,
                 left >= 0 ? left : MPI_PROC_NULL, 1, comm, MPI_STATUS_IGNORE);
    std::vector<double> next = temperature_;
    for (int i = 1; i <= n; ++i)
      next[static_cast<std::size_t>(i)] +=
          0.25 * (temperature_[static_cast<std::size_t>(i) - 1] - 2 * temperature_[static_cast<std::size_t>(i)] +
                  temperature_[static_cast<std::size_t>(i) + 1]);
    temperature_.swap(next);
  }

  /// Collective: the total heat of the rod.
  double total_heat() const {
    double mine = 0;
    for (std::size_t i = 1; i + 1 < temperature_.size(); ++i) mine += temperature_[i];
    return comm_.all_reduce(mine, strider::ReduceOp::sum);
  }

 private:
  const strider::Communicator& comm_;
  std::vector<double> temperature_;
};

int run(strider::Communicator& comm, int argc, char** argv) {
  namespace po = boost::program_options;
  std::string data;
  int steps = 200, train_every = 4, batch_size = 32;
  po::options_description options("strider-sim-example: a simulation that trains as it runs");
  options.add_options()("help", "this help")("data", po::value(&data)->required(), "training file (HDF5)")(
      "steps", po::value(&steps)->default_value(steps), "simulation time steps")(
      "train-every", po::value(&train_every)->default_value(train_every), "one training step every N simulation steps")(
      "batch-size", po::value(&batch_size)->default_value(batch_size), "samples per rank per training step");
  po::variables_map values;
  comm.collective_try([&] {  // every rank parses; a bad option ends all ranks with one line
    try {
      po::store(po::parse_command_line(argc, argv, options), values);
      if (values.count("help")) return;
      po::notify(values);
    } catch (const po::error& error) {
      STRIDER_THROW(strider::UsageError, error.what());
    }
    if (train_every < 1) STRIDER_THROW(strider::UsageError, "--train-every must be >= 1");
  });
  if (values.count("help")) {
    if (comm.is_root()) std::cout << options << std::endl;
    return 0;
  }

  // 2. One seed for everybody (rank 0's, broadcast).
  const std::int64_t seed = strider::agree_on_seed(comm, 42);

  // 3 + 5. The reader goes to the prefetcher, whose I/O thread owns it from now on.
  strider::ReaderOptions reader_options;
  reader_options.require_labels = true;
  strider::Prefetcher prefetcher(strider::open_reader(comm, data, reader_options),
                                 strider::PrefetcherOptions{4, nullptr});
  const strider::DatasetInfo& dataset = prefetcher.dataset();

  // 4. The sampler: torch's DistributedSampler order, batches of batch_size per rank.
  strider::SamplerOptions sampling;
  sampling.dataset_size = dataset.num_samples;
  sampling.batch_size = batch_size;
  sampling.seed = seed;
  std::unique_ptr<strider::Sampler> sampler = strider::make_sampler(sampling, comm.size(), comm.rank());

  // 6. The model: an MLP on the file's features, the same initial parameters on every rank.
  std::string why;
  std::unique_ptr<strider::Backend> backend =
      comm.collective_try([&] { return strider::make_backend("auto", comm, &why); });
  strider::ModelConfig model;
  std::int32_t max_label = 0;
  for (std::int32_t label : prefetcher.labels()) max_label = std::max(max_label, label);
  model.num_classes = max_label + 1;
  model.seed = seed;
  comm.collective_try([&] { backend->initialize(strider::resolve_model_config(model, dataset)); });

  HeatRod rod(comm, 1000);
  std::int64_t epoch = 0;
  sampler->set_epoch(epoch);
  prefetcher.start_epoch(*sampler);
  double loss_sum = 0;
  std::int64_t trained = 0;

  for (int t = 1; t <= steps; ++t) {
    rod.step();
    if (t % train_every != 0) continue;

    // A training step: the next batch, forward/backward, gradients all-reduced, SGD. Every rank
    // runs the same number of training steps (the sampler guarantees equal step counts).
    std::optional<strider::Batch> batch = comm.collective_try([&] { return prefetcher.next(); });
    if (!batch) {  // end of the epoch: the next one, with a new order (set_epoch!)
      sampler->set_epoch(++epoch);
      prefetcher.start_epoch(*sampler);
      batch = comm.collective_try([&] { return prefetcher.next(); });
    }
    strider::BatchInput input;
    input.samples = batch->samples();
    input.type = dataset.element_type;
    input.count = batch->size();
    input.features = backend->config().features;
    input.labels = batch->labels();
    const strider::StepResult local = backend->forward_backward(input);
    const std::int64_t global_count = comm.all_reduce(local.count, strider::ReduceOp::sum);
    backend->all_reduce_gradients(comm, global_count);
    backend->apply_sgd(0.05f, 0.9f);
    loss_sum += comm.all_reduce(local.loss_sum, strider::ReduceOp::sum);
    trained += global_count;
    batch.reset();  // the buffer goes back to the ring

    if (t % (train_every * 25) == 0 && comm.is_root())
      std::cout << "step " << t << ": heat " << rod.total_heat() << ", mean training loss "
                << loss_sum / static_cast<double>(trained) << " over " << trained << " samples" << std::endl;
    else if (t % (train_every * 25) == 0)
      rod.total_heat();  // collective: every rank takes part
  }
  prefetcher.stop();
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
