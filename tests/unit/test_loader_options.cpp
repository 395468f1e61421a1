// The shared option table: every option is settable from text onto the field it names, its default
// is LoaderOptions{}'s value, and a bad value is refused with a message naming the option.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <set>

#include "strider/core/error.hpp"
#include "strider/core/option_text.hpp"
#include "strider/pipeline/loader_options.hpp"
#include "usage_error.hpp"

using namespace strider;
using strider::testing::usage_error_of;

namespace {

/// Per option: a value to set, and a check on the field it must land in (written here, not taken
/// from the table).
struct Expectation {
  std::string text;
  std::function<bool(const LoaderOptions&)> landed;
};

const std::map<std::string, Expectation>& expectations() {
  static const std::map<std::string, Expectation> table = {
      {"data", {"train.h5", [](const LoaderOptions& o) { return o.data_path == "train.h5"; }}},
      {"data-key", {"/x", [](const LoaderOptions& o) { return o.reader.keys.data == "/x"; }}},
      {"label-key", {"/y", [](const LoaderOptions& o) { return o.reader.keys.labels == "/y"; }}},
      {"tokens-key", {"/t", [](const LoaderOptions& o) { return o.reader.keys.tokens == "/t"; }}},
      {"offsets-key", {"/o", [](const LoaderOptions& o) { return o.reader.keys.offsets == "/o"; }}},
      {"engine", {"direct", [](const LoaderOptions& o) { return o.reader.engine == "direct"; }}},
      {"odirect", {"true", [](const LoaderOptions& o) { return o.reader.odirect; }}},
      {"sampler", {"balanced", [](const LoaderOptions& o) { return o.sampler.mode == "balanced"; }}},
      {"batch-size", {"7", [](const LoaderOptions& o) { return o.sampler.batch_size == 7; }}},
      {"no-shuffle", {"true", [](const LoaderOptions& o) { return !o.sampler.shuffle; }}},
      {"drop-last", {"true", [](const LoaderOptions& o) { return o.sampler.drop_last; }}},
      {"drop-last-batch", {"true", [](const LoaderOptions& o) { return o.sampler.drop_last_batch; }}},
      {"class-weights",
       {"0.5,2",
        [](const LoaderOptions& o) {
          return o.sampler.class_weights == std::vector<double>{0.5, 2.0};
        }}},
      {"balance", {"min", [](const LoaderOptions& o) { return o.sampler.balance == "min"; }}},
      {"stratify-target", {"uniform", [](const LoaderOptions& o) { return o.sampler.stratify_target == "uniform"; }}},
      {"num-samples", {"11", [](const LoaderOptions& o) { return o.sampler.num_samples == 11; }}},
      {"max-tokens", {"512", [](const LoaderOptions& o) { return o.sampler.max_tokens == 512; }}},
      {"max-batch-size", {"9", [](const LoaderOptions& o) { return o.sampler.max_batch_size == 9; }}},
      {"batch-size-multiple", {"4", [](const LoaderOptions& o) { return o.sampler.batch_size_multiple == 4; }}},
      {"megabatch", {"3", [](const LoaderOptions& o) { return o.sampler.megabatch == 3; }}},
      {"step-group", {"5", [](const LoaderOptions& o) { return o.sampler.step_group == 5; }}},
      {"most-expensive-first", {"true", [](const LoaderOptions& o) { return o.sampler.most_expensive_first; }}},
      {"block-size", {"16", [](const LoaderOptions& o) { return o.sampler.block_size == 16; }}},
      {"block-window", {"2", [](const LoaderOptions& o) { return o.sampler.block_window == 2; }}},
      {"seed", {"-12", [](const LoaderOptions& o) { return o.seed == std::int64_t{-12}; }}},
      {"prefetch", {"64", [](const LoaderOptions& o) { return o.prefetch == 64; }}},
      {"plan-per-rank", {"true", [](const LoaderOptions& o) { return !o.diagnostics.plan_per_node; }}},
      {"copy-threads", {"3", [](const LoaderOptions& o) { return o.reader.copy_threads == 3; }}},
      {"max-open-files", {"5", [](const LoaderOptions& o) { return o.reader.max_open_files == 5; }}},
      {"store", {"memory", [](const LoaderOptions& o) { return o.store.mode == "memory"; }}},
      {"store-layout", {"replicate", [](const LoaderOptions& o) { return o.store.layout == "replicate"; }}},
      {"store-budget", {"8192", [](const LoaderOptions& o) { return o.store.budget_bytes == 8192; }}},
      {"lookahead", {"256", [](const LoaderOptions& o) { return o.lookahead == 256; }}},
      {"io-thread", {"no", [](const LoaderOptions& o) { return !o.io_thread && !o.measure_thread_layout; }}},
  };
  return table;
}

}  // namespace

TEST_CASE("option table: every option sets the field it names, from text, and reads back", "[loader_options]") {
  std::set<std::string> seen;
  for (const LoaderOption& option : loader_option_table()) {
    CAPTURE(option.name);
    REQUIRE(seen.insert(option.name).second);  // names are unique
    REQUIRE(expectations().count(option.name) == 1);
    const Expectation& expected = expectations().at(option.name);
    LoaderOptions options;
    REQUIRE_FALSE(expected.landed(options));
    set_loader_option(options, option.name, expected.text);
    CHECK(expected.landed(options));
    CHECK(option.get(options) == expected.text);
    CHECK_FALSE(option.help.empty());
    CHECK((option.group == "data" || option.group == "sampling" || option.group == "pipeline" ||
           option.group == "store" || option.group == "diagnostics"));
  }
  CHECK(seen.size() == expectations().size());
}

TEST_CASE("option table: one default per option, LoaderOptions{}'s, as the apps document it", "[loader_options]") {
  // The defaults the apps' --help has always shown (README), written out here.
  const std::map<std::string, std::string> documented = {{"data", ""},
                                                         {"data-key", "/samples"},
                                                         {"label-key", "/labels"},
                                                         {"tokens-key", "/tokens"},
                                                         {"offsets-key", "/offsets"},
                                                         {"engine", "auto"},
                                                         {"odirect", "false"},
                                                         {"sampler", "distributed"},
                                                         {"batch-size", "32"},
                                                         {"no-shuffle", "false"},
                                                         {"drop-last", "false"},
                                                         {"drop-last-batch", "false"},
                                                         {"class-weights", ""},
                                                         {"balance", "max"},
                                                         {"stratify-target", "freq"},
                                                         {"num-samples", "0"},
                                                         {"max-tokens", "0"},
                                                         {"max-batch-size", "0"},
                                                         {"batch-size-multiple", "1"},
                                                         {"megabatch", "64"},
                                                         {"step-group", "64"},
                                                         {"most-expensive-first", "false"},
                                                         {"block-size", "0"},
                                                         {"block-window", "8"},
                                                         {"seed", ""},
                                                         {"prefetch", "0"},
                                                         {"plan-per-rank", "false"},
                                                         {"copy-threads", "1"},
                                                         {"max-open-files", "64"},
                                                         {"store", "none"},
                                                         {"store-layout", "auto"},
                                                         {"store-budget", "0"},
                                                         {"lookahead", "0"},
                                                         {"io-thread", "auto"}};
  const LoaderOptions defaults;
  for (const LoaderOption& option : loader_option_table()) {
    CAPTURE(option.name);
    REQUIRE(documented.count(option.name) == 1);
    CHECK(option.default_text == documented.at(option.name));
    CHECK(option.get(defaults) == documented.at(option.name));
  }
  CHECK_FALSE(defaults.seed.has_value());  // no default seed: the Loader agrees on a drawn one
}

TEST_CASE("option table: a bad value is refused naming the option", "[loader_options]") {
  for (const LoaderOption& option : loader_option_table()) {
    CAPTURE(option.name);
    LoaderOptions options;
    const std::string flag = "--" + option.name;
    switch (option.type) {
      case OptionType::flag:
        CHECK(usage_error_of([&] { set_loader_option(options, option.name, "maybe"); }) ==
              "the argument ('maybe') for option '" + flag + "' is invalid");
        break;
      case OptionType::int32:
      case OptionType::int64:
        for (const char* bad : {"abc", "1.5", "", " 5", "5 ", "0x10", "99999999999999999999"})
          CHECK(usage_error_of([&] { set_loader_option(options, option.name, bad); }) ==
                "the argument ('" + std::string(bad) + "') for option '" + flag + "' is invalid");
        break;
      case OptionType::text:
        break;  // any text is a name; the reader and the sampler judge it
    }
  }
  LoaderOptions options;
  CHECK(usage_error_of([&] { set_loader_option(options, "batch-size", "-1"); }) ==
        "--batch-size must be >= 1, or 'all' for one batch of the whole epoch; got -1");
  // The whole epoch as one batch only by name: 0 is refused, "all" asks for it.
  CHECK(usage_error_of([&] { set_loader_option(options, "batch-size", "0"); }) ==
        "--batch-size must be >= 1, or 'all' for one batch of the whole epoch; got 0");
  for (const char* bad : {"abc", "1.5", "", "ALL", "0x10"})
    CHECK(usage_error_of([&] { set_loader_option(options, "batch-size", bad); }) ==
          "the argument ('" + std::string(bad) + "') for option '--batch-size' is invalid");
  CHECK(usage_error_of([&] { set_loader_option(options, "num-samples", "-3"); }) ==
        "--num-samples must be >= 0, got -3");
  CHECK(usage_error_of([&] { set_loader_option(options, "prefetch", "65"); }) ==
        "--prefetch must be in 0..64 (0: auto), got 65");
  CHECK(usage_error_of([&] { set_loader_option(options, "prefetch", "-1"); }) ==
        "--prefetch must be in 0..64 (0: auto), got -1");
  CHECK(usage_error_of([&] { set_loader_option(options, "prefetch", "3000000000"); }) ==
        "the argument ('3000000000') for option '--prefetch' is invalid");
  CHECK(usage_error_of([&] { set_loader_option(options, "copy-threads", "0"); }) ==
        "--copy-threads must be >= 1, got 0");
  // Bounds that keep a typo from starting 100,000 threads or overflowing a global batch's arithmetic.
  CHECK(usage_error_of([&] { set_loader_option(options, "copy-threads", "100000"); }) ==
        "--copy-threads must be at most 1024, got 100000");
  CHECK(usage_error_of([&] { set_loader_option(options, "batch-size", "4611686018427387904"); }) ==
        "--batch-size must be at most 1099511627776, got 4611686018427387904");
  CHECK(usage_error_of([&] { set_loader_option(options, "max-open-files", "0"); }) ==
        "--max-open-files must be >= 1, got 0");
  CHECK(usage_error_of([&] { set_loader_option(options, "store", "disk"); }) ==
        "unknown --store value 'disk' (known: none, memory)");
  CHECK(usage_error_of([&] { set_loader_option(options, "store-layout", "spread"); }) ==
        "unknown --store-layout value 'spread' (known: partition, replicate, auto)");
  CHECK(usage_error_of([&] { set_loader_option(options, "lookahead", "-1"); }) == "--lookahead must be >= 0, got -1");
  for (const char* bad : {"", "M", "12X", "5MBB", "-1G", "1.5G", "99999999999T"})
    CHECK(usage_error_of([&] { set_loader_option(options, "store-budget", bad); }) ==
          "the argument ('" + std::string(bad) + "') for option '--store-budget' is invalid");
  CHECK(usage_error_of([&] { set_loader_option(options, "class-weights", "1,x"); }) ==
        "--class-weights: 'x' is not a number (expected a comma-separated list)");
  CHECK(usage_error_of([&] { set_loader_option(options, "class-weights", "1,,2"); }) ==
        "--class-weights: '' is not a number (expected a comma-separated list)");
  CHECK(usage_error_of([&] { set_loader_option(options, "frobnicate", "1"); }) == "unknown option '--frobnicate'");
  // A typo of a name gets the nearest one: a swap, a letter lost or added, a prefix.
  CHECK(usage_error_of([&] { set_loader_option(options, "batch-sise", "1"); }) ==
        "unknown option '--batch-sise'; did you mean '--batch-size'?");
  CHECK(usage_error_of([&] { set_loader_option(options, "sampler", "balancd"); }) ==
        "unknown sampler 'balancd'; did you mean 'balanced'? (known: distributed, streaming, bucketed, block, "
        "balanced, weighted, stratified)");
  CHECK(usage_error_of([&] { set_loader_option(options, "sampler", "wieghted"); }).find("did you mean 'weighted'?") !=
        std::string::npos);
  CHECK(usage_error_of([&] { set_loader_option(options, "engine", "mmpa"); }) ==
        "unknown engine 'mmpa'; did you mean 'mmap'? (known: auto, hdf5, direct, mmap)");
  CHECK(usage_error_of([&] { set_loader_option(options, "io-thread", "ye"); }) ==
        "unknown --io-thread value 'ye'; did you mean 'yes'? (known: auto, yes, no)");
  // A refused value leaves the option as it was.
  CHECK(options.sampler.batch_size == 32);
  CHECK(options.prefetch == 0);
}

TEST_CASE("option table: --batch-size all is the whole epoch as one batch, and reads back as all", "[loader_options]") {
  LoaderOptions options;
  set_loader_option(options, "batch-size", "all");
  CHECK(options.sampler.batch_size == 0);  // SamplerOptions' whole-epoch batch
  CHECK(loader_option("batch-size").get(options) == "all");
  set_loader_option(options, "batch-size", "64");
  CHECK(options.sampler.batch_size == 64);
}

TEST_CASE("option text: integers, flags and lists parse whole", "[loader_options]") {
  CHECK(parse_integer_option("+4", "n") == 4);
  CHECK(parse_integer_option("-9223372036854775808", "n") == INT64_MIN);
  CHECK(parse_int_option("-2147483648", "n") == INT32_MIN);
  CHECK(usage_error_of([] { parse_int_option("2147483648", "n"); }) ==
        "the argument ('2147483648') for option '--n' is invalid");
  CHECK(usage_error_of([] { parse_integer_option("+-1", "n"); }) == "the argument ('+-1') for option '--n' is invalid");
  for (const char* yes : {"true", "1", "yes", "on"}) CHECK(parse_flag_option(yes, "f"));
  for (const char* no : {"false", "0", "no", "off"}) CHECK_FALSE(parse_flag_option(no, "f"));
  CHECK(parse_integer_list("3,-1,20", "l") == std::vector<std::int64_t>{3, -1, 20});
  CHECK(parse_real_list("0.25,1e3", "l") == std::vector<double>{0.25, 1000.0});
  CHECK(usage_error_of([] { parse_integer_list("1,2.5", "l"); }) ==
        "--l: '2.5' is not a number (expected a comma-separated list)");
  const std::vector<double> values = {0.1, 1.0 / 3.0, 2e-300};
  CHECK(parse_real_list(format_real_list(values), "l") == values);  // exact round trip
}

TEST_CASE("option text: the nearest name of a typo, and numbers as written", "[loader_options]") {
  const std::vector<std::string> names = {"distributed", "balanced", "weighted", "block"};
  CHECK(nearest_name("balancd", names) == "balanced");     // a letter lost
  CHECK(nearest_name("weigthed", names) == "weighted");    // two neighbours swapped
  CHECK(nearest_name("distrib", names) == "distributed");  // a prefix
  CHECK(nearest_name("blocks", names) == "block");         // a letter added
  CHECK(nearest_name("random", names).empty());            // nothing near
  CHECK(nearest_name("", names).empty());
  CHECK_NOTHROW(check_choice("block", names, "sampler"));
  CHECK(usage_error_of([&] { check_choice("bock", names, "sampler"); }) ==
        "unknown sampler 'bock'; did you mean 'block'? (known: distributed, balanced, weighted, block)");
  CHECK(format_number(0.1f) == "0.1");
  CHECK(format_number(0.9f) == "0.9");
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(300.0) == "300");
  CHECK(format_number(1e-5) == "1e-05");
  CHECK(format_number(1e6) == "1000000");
  CHECK(format_number(2.5e20) == "2.5e+20");
  CHECK(format_number(1.0 / 3.0) == "0.3333333333333333");
}

TEST_CASE("option text: byte sizes take binary suffixes; bytes print in decimal units", "[loader_options]") {
  const std::int64_t kib = 1024;
  CHECK(parse_byte_size_option("0", "b") == 0);
  CHECK(parse_byte_size_option("4096", "b") == 4096);
  CHECK(parse_byte_size_option("3K", "b") == 3 * kib);
  CHECK(parse_byte_size_option("512M", "b") == 512 * kib * kib);
  CHECK(parse_byte_size_option("512m", "b") == 512 * kib * kib);
  CHECK(parse_byte_size_option("8GiB", "b") == 8 * kib * kib * kib);
  CHECK(parse_byte_size_option("2TB", "b") == 2 * kib * kib * kib * kib);
  CHECK(format_bytes(999) == "999 bytes");
  CHECK(format_bytes(1000) == "1.0 kB");
  CHECK(format_bytes(242000000) == "242.0 MB");
  CHECK(format_bytes(1550000000) == "1.6 GB");
  CHECK(format_shape({}) == "[]");
  CHECK(format_shape({64}) == "[64]");
  CHECK(format_shape({3, 32, 32}) == "[3, 32, 32]");
}
