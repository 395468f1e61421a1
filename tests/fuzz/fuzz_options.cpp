// Random command lines against the apps' real sampler and dataset options: every one must parse and
// build a sampler, or fail with a UsageError (one line, exit 2) — never another error or a crash.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "common/cli.hpp"
#include "strider/core/error.hpp"

using namespace strider;

namespace {
int fuzz_cases(int fallback) {
  const char* text = std::getenv("STRIDER_FUZZ_CASES");
  return text ? std::atoi(text) : fallback;
}
}  // namespace

TEST_CASE("fuzz: sampler and dataset options", "[fuzz]") {
  const std::vector<std::string> tokens = {"--sampler",
                                           "distributed",
                                           "balanced",
                                           "weighted",
                                           "stratified",
                                           "bucketed",
                                           "streaming",
                                           "block",
                                           "nope",
                                           "--batch-size",
                                           "-1",
                                           "0",
                                           "1",
                                           "7",
                                           "64",
                                           "99999999999999999999",
                                           "abc",
                                           "--class-weights",
                                           "1,nan",
                                           "1,2,3",
                                           "0,0,0",
                                           "-1,2",
                                           "1,,2",
                                           "--max-tokens",
                                           "--megabatch",
                                           "--step-group",
                                           "--balance",
                                           "min",
                                           "max",
                                           "--stratify-target",
                                           "uniform",
                                           "freq",
                                           "x,y",
                                           "--num-samples",
                                           "--block-size",
                                           "--block-window",
                                           "--no-shuffle",
                                           "--drop-last",
                                           "--drop-last-batch",
                                           "--most-expensive-first",
                                           "--max-batch-size",
                                           "--batch-size-multiple",
                                           "--data-key",
                                           "/samples",
                                           "--engine",
                                           "mmap",
                                           "",
                                           "--",
                                           "=",
                                           "--batch-size=3"};
  std::mt19937_64 random(20261129);
  int parsed = 0, refused = 0;
  for (int round = 0; round < fuzz_cases(3000); ++round) {
    std::vector<std::string> args;
    const int count = static_cast<int>(random() % 9);
    for (int i = 0; i < count; ++i) args.push_back(tokens[random() % tokens.size()]);
    CAPTURE(args);
    LoaderOptions loading;
    SamplerOptions& sampler = loading.sampler;
    cli::po::options_description description;
    cli::SharedOptions shared;
    shared.add(description, cli::loader_option_names("sampling", {"seed"}));
    shared.add(description, cli::loader_option_names("data", {"data"}));
    try {
      const cli::Parsed result = cli::parse(args, description, "fuzz");
      shared.apply(result.values, loading);
      // A dataset to go with the options: random size, classes and lengths.
      sampler.dataset_size = static_cast<std::int64_t>(random() % 300);
      auto labels = std::make_shared<std::vector<std::int32_t>>();
      auto lengths = std::make_shared<std::vector<std::int64_t>>();
      const int classes = 1 + static_cast<int>(random() % 4);
      for (std::int64_t i = 0; i < sampler.dataset_size; ++i) {
        labels->push_back(static_cast<std::int32_t>(random() % classes));
        lengths->push_back(1 + static_cast<std::int64_t>(random() % 500));
      }
      sampler.labels = labels;
      sampler.lengths = lengths;
      const int world = 1 + static_cast<int>(random() % 4);
      auto made = make_sampler(sampler, world, static_cast<int>(random() % world));
      made->set_epoch(static_cast<std::int64_t>(random() % 3));
      std::vector<std::int64_t> batch;
      for (std::int64_t step = 0; step < std::min<std::int64_t>(made->num_steps(), 3); ++step) {
        made->batch(step, batch);
        for (std::int64_t index : batch) {
          REQUIRE(index >= 0);
          REQUIRE(index < sampler.dataset_size);
        }
      }
      ++parsed;
    } catch (const UsageError& error) {
      REQUIRE(std::string(error.what()).find('\n') == std::string::npos);  // one line
      REQUIRE(exit_code_for(error) == 2);
      ++refused;
    } catch (const Error& error) {
      FAIL("refused with an error that is not a UsageError (apps would not exit 2): " << error.what());
    }
  }
  // Both outcomes happen: the fuzzer reaches the samplers and the checks.
  CHECK(parsed > 0);
  CHECK(refused > 0);
}
