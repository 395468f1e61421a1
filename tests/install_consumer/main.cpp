// A small trainer built against an installed strider (tests/integration/test_install.sh): it
// writes a tiny dataset, reads it through a strider::Loader for two epochs and trains a softmax
// model on the CPU backend. Prints the first batch (torch's DistributedSampler order) and the count
// of samples trained.
#include <mpi.h>

#include <iostream>
#include <memory>
#include <strider/comm/communicator.hpp>
#include <strider/device/backend.hpp>
#include <strider/io/synthetic_dataset.hpp>
#include <strider/pipeline/loader.hpp>
#include <strider/train/batch_input.hpp>
#include <strider/train/model.hpp>
#include <string>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int status = 0;
  try {
    const strider::Communicator comm = strider::Communicator::duplicate(MPI_COMM_WORLD);
    strider::SyntheticOptions data;
    data.samples = 10;
    data.classes = 2;
    data.dim = 4;
    data.progress = false;
    const std::string path = argc > 1 ? argv[1] : "consumer.h5";
    strider::write_synthetic_dataset(comm, path, data);

    // The backend first, then the Loader, then the model from the dataset.
    std::string why;
    std::unique_ptr<strider::Backend> backend = strider::make_backend("cpu", comm, &why);
    strider::LoaderOptions options;
    options.allocator = backend->host_allocator();
    options.data_path = path;
    options.sampler.batch_size = 4;
    options.seed = 0;
    options.reader.require_labels = true;
    strider::Loader loader(comm, options);
    strider::ModelConfig model;
    model.kind = "softmax";
    model.num_classes = 2;
    model.seed = loader.seed();
    backend->initialize(strider::resolve_model_config(model, loader.dataset()));

    std::int64_t samples = 0, steps = 0;
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      for (strider::Batch batch : loader.epoch(epoch)) {
        if (epoch == 0 && batch.step() == 0 && comm.is_root()) {
          std::cout << "first batch:";
          for (std::int64_t index : batch.indices()) std::cout << " " << index;
          std::cout << std::endl;
        }
        const strider::StepResult step = backend->forward_backward(strider::batch_input(batch, loader.dataset()));
        const std::int64_t count = comm.all_reduce(step.count, strider::ReduceOp::sum);
        backend->all_reduce_gradients(comm, count);
        backend->apply_sgd(0.1f, 0.9f);
        samples += count;
        ++steps;
      }
    }
    loader.close();
    if (comm.is_root()) std::cout << "trained " << samples << " samples in " << steps << " steps" << std::endl;
  } catch (const std::exception& error) {
    std::cerr << "consumer: " << error.what() << std::endl;
    status = 1;
  }
  MPI_Finalize();
  return status;
}
