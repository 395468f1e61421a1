// A data-parallel trainer on LibTorch, fed by strider's Loader, under MPI:
//
//   mpirun -np 2 build/bin/libtorch_trainer --data train.h5 --epochs 3 --batch-size 32
//       --checkpoint run.ckpt [--resume] [--stop-after STEPS]
//
// Every rank trains a copy of a small MLP on its own batches: torch::from_blob wraps the batch's
// memory in the ring (no copy). The gradients are averaged with strider's Communicator (an
// all-reduce over MPI; Debian's LibTorch has no MPI backend), each batch is taken inside the step's
// collective_try so that a read error on one rank stops every rank, and one torch thread runs per
// rank. A checkpoint holds the model, the optimizer and the Loader's position (written by rank 0 to
// a temporary file, then renamed); --stop-after STEPS saves and stops there, as a preempted job would,
// and --resume goes on with the same batches as a run that never stopped. Options: --epochs, --lr,
// --momentum, --hidden, --checkpoint, --resume, --stop-after, and every option of the library's
// shared table (--sampler, --batch-size, --seed, --engine, ...). Built only where LibTorch is found.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/option_text.hpp"
#include "strider/pipeline/loader.hpp"
#include "strider/pipeline/loader_options.hpp"

namespace {

struct Settings {
  strider::LoaderOptions loader;
  std::int64_t epochs = 3;
  double lr = 0.05;
  double momentum = 0.9;
  std::int64_t hidden = 64;
  std::string checkpoint;
  bool resume = false;
  std::int64_t stop_after = 0;
};

Settings parse_settings(int argc, char** argv) {
  Settings settings;
  settings.loader.sampler.batch_size = 64;
  settings.loader.seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind("--", 0) != 0) STRIDER_THROW(strider::UsageError, "unexpected argument '" + argument + "'");
    const std::string name = argument.substr(2);
    if (name == "resume") {
      settings.resume = true;
      continue;
    }
    const bool is_flag = name != "epochs" && name != "lr" && name != "momentum" && name != "hidden" &&
                         name != "checkpoint" && name != "stop-after" &&
                         strider::loader_option(name).type == strider::OptionType::flag;
    if (is_flag) {
      strider::set_loader_option(settings.loader, name, "true");
      continue;
    }
    if (i + 1 >= argc) STRIDER_THROW(strider::UsageError, "--" + name + " needs a value");
    const std::string value = argv[++i];
    if (name == "epochs")
      settings.epochs = strider::parse_integer_option(value, name);
    else if (name == "lr")
      settings.lr = std::stod(value);
    else if (name == "momentum")
      settings.momentum = std::stod(value);
    else if (name == "hidden")
      settings.hidden = strider::parse_integer_option(value, name);
    else if (name == "checkpoint")
      settings.checkpoint = value;
    else if (name == "stop-after")
      settings.stop_after = strider::parse_integer_option(value, name);
    else
      strider::set_loader_option(settings.loader, name, value);  // throws "unknown option" for the rest
  }
  return settings;
}

torch::Dtype torch_type(strider::ElementType type) {
  switch (type) {
    case strider::ElementType::int8:
      return torch::kInt8;
    case strider::ElementType::uint8:
      return torch::kUInt8;
    case strider::ElementType::int16:
      return torch::kInt16;
    case strider::ElementType::int32:
      return torch::kInt32;
    case strider::ElementType::int64:
      return torch::kInt64;
    case strider::ElementType::float32:
      return torch::kFloat32;
    case strider::ElementType::float64:
      return torch::kFloat64;
    default:
      break;
  }
  STRIDER_THROW(strider::UsageError,
                std::string("LibTorch has no tensor type for ") + strider::element_name(type) + " samples");
}

struct MlpImpl : torch::nn::Module {
  MlpImpl(std::int64_t inputs, std::int64_t hidden, std::int64_t classes)
      : first(register_module("first", torch::nn::Linear(inputs, hidden))),
        second(register_module("second", torch::nn::Linear(hidden, classes))) {}
  torch::Tensor forward(const torch::Tensor& x) { return second(torch::relu(first(x))); }
  torch::nn::Linear first, second;
};
TORCH_MODULE(Mlp);

/// Collective over comm: every rank's gradients become their mean.
void average_gradients(const strider::Communicator& comm, Mlp& model) {
  for (torch::Tensor& parameter : model->parameters()) {
    torch::Tensor& gradient = parameter.mutable_grad();
    comm.all_reduce(gradient.data_ptr<float>(), gradient.numel(), strider::ReduceOp::sum);
    gradient.div_(comm.size());
  }
}

/// Collective: rank 0 writes model, optimizer, the Loader's state and the step to path (through a
/// temporary file, renamed, so that a checkpoint is whole or absent).
void save_checkpoint(const strider::Communicator& comm, const std::string& path, Mlp& model,
                     torch::optim::SGD& optimizer, const strider::SamplerState& state, std::int64_t step) {
  comm.collective_try([&] {
    if (!comm.is_root()) return;
    torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
    model->save(model_archive);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("loader", c10::IValue(state.serialize()));
    archive.write("step", c10::IValue(step));
    archive.save_to(path + ".tmp");
    std::filesystem::rename(path + ".tmp", path);
  });
}

/// Loads a checkpoint on every rank and makes the Loader go on from it; returns its step count.
std::int64_t load_checkpoint(const strider::Communicator& comm, const std::string& path, Mlp& model,
                             torch::optim::SGD& optimizer, strider::Loader& loader) {
  return comm.collective_try([&] {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    archive.load_from(path);
    archive.read("model", model_archive);
    archive.read("optimizer", optimizer_archive);
    model->load(model_archive);
    optimizer.load(optimizer_archive);
    c10::IValue state, step;
    archive.read("loader", state);
    archive.read("step", step);
    loader.resume(strider::SamplerState::parse(state.toStringRef()));  // checks dataset, sampler, seed
    return step.toInt();
  });
}

int train(strider::Communicator& world, const Settings& settings) {
  torch::set_num_threads(1);
  strider::Loader loader(world, settings.loader);
  const strider::DatasetInfo& info = loader.dataset();
  if (info.variable_length) STRIDER_THROW(strider::UsageError, "this example trains on fixed-size samples");
  if (!info.has_labels) STRIDER_THROW(strider::UsageError, "this example needs labels");
  std::vector<std::int32_t> labels(static_cast<std::size_t>(info.num_samples));
  loader.read_labels(0, info.num_samples, labels.data());  // between epochs: from memory or the file
  const std::int64_t classes = *std::max_element(labels.begin(), labels.end()) + 1;
  std::int64_t features = 1;
  for (std::int64_t extent : info.sample_shape) features *= extent;
  const torch::Dtype sample_type = torch_type(info.element_type);

  torch::manual_seed(0);
  Mlp model(features, settings.hidden, classes);
  for (torch::Tensor& parameter : model->parameters())  // every rank starts from rank 0's parameters
    world.broadcast(parameter.data_ptr<float>(), parameter.numel());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(settings.lr).momentum(settings.momentum));

  std::int64_t step = 0, first_epoch = 0;
  if (settings.resume && !settings.checkpoint.empty() && std::filesystem::exists(settings.checkpoint)) {
    step = load_checkpoint(world, settings.checkpoint, model, optimizer, loader);
    first_epoch = loader.state().epoch;
    if (world.is_root()) std::printf("resumed at epoch %lld, step %lld\n", (long long)first_epoch, (long long)step);
  }
  for (std::int64_t epoch_number = first_epoch; epoch_number < settings.epochs; ++epoch_number) {
    double totals[3] = {0, 0, 0};  // loss sum, correct, samples
    strider::LoaderEpoch epoch = loader.epoch(epoch_number);
    for (;;) {
      // A read error on one rank reaches every rank here, before the gradients' all-reduce.
      std::optional<strider::Batch> batch = world.collective_try([&] { return epoch.next(); });
      if (!batch) break;
      const std::int64_t count = batch->size();
      // A view of the ring's memory; converted only when the file's type is not float32.
      const torch::Tensor x = torch::from_blob(const_cast<std::byte*>(batch->samples()), {count, features}, sample_type)
                                  .to(torch::kFloat32);
      const torch::Tensor y =
          torch::from_blob(const_cast<std::int32_t*>(batch->labels()), {count}, torch::kInt32).to(torch::kInt64);
      optimizer.zero_grad();
      const torch::Tensor output = model->forward(x);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(output, y);
      loss.backward();
      average_gradients(world, model);
      optimizer.step();
      ++step;
      totals[0] += loss.item<double>() * static_cast<double>(count);
      totals[1] += output.argmax(1).eq(y).sum().item<double>();
      totals[2] += static_cast<double>(count);
      if (settings.stop_after > 0 && step == settings.stop_after) {
        if (!settings.checkpoint.empty())
          save_checkpoint(world, settings.checkpoint, model, optimizer, loader.state(), step);
        if (world.is_root()) std::printf("stopped after step %lld\n", (long long)step);
        loader.close();
        return 0;
      }
    }
    world.all_reduce(totals, 3, strider::ReduceOp::sum);
    if (world.is_root())
      std::printf("epoch %lld: loss %.4f accuracy %.4f (%.0f samples)\n", (long long)epoch_number,
                  totals[0] / std::max(1.0, totals[2]), totals[1] / std::max(1.0, totals[2]), totals[2]);
    if (!settings.checkpoint.empty())
      save_checkpoint(world, settings.checkpoint, model, optimizer, loader.state(), step);
  }
  strider::Fnv1a64 digest;
  for (const torch::Tensor& parameter : model->parameters())
    digest.add_bytes(parameter.data_ptr<float>(), static_cast<std::size_t>(parameter.numel()) * sizeof(float));
  if (world.is_root())
    std::printf("parameters %016llx after %lld steps\n", (unsigned long long)digest.value(), (long long)step);
  loader.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [&](strider::Communicator& world) {
    const Settings settings = world.collective_try([&] { return parse_settings(argc, argv); });
    return train(world, settings);
  });
}
