// Core pieces: error messages, JSON writer, the move-only handle, log levels, hashing, shared views.
#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/core/json_writer.hpp"
#include "strider/core/log.hpp"
#include "strider/core/shared_view.hpp"
#include "strider/core/unique_handle.hpp"

using namespace strider;

TEST_CASE("errors carry the call, the location and a hint", "[core][error]") {
  const Error error(ErrorContext{"H5Dread(dataset, type, ...)", "src/io/h5_reader.cpp", 88, 3, -1,
                                 "reading /samples rows 1024..2047"});
  REQUIRE(std::string(error.what()) ==
          "[rank 3] H5Dread failed reading /samples rows 1024..2047 (src/io/h5_reader.cpp:88)");
  REQUIRE(error.reason() == "H5Dread failed reading /samples rows 1024..2047");
  REQUIRE(error.context().code == -1);

  try {
    STRIDER_THROW(UsageError, "--world must be positive");
  } catch (const UsageError& usage) {
    REQUIRE(usage.reason() == "--world must be positive");
    REQUIRE(usage.context().file == "tests/unit/test_core.cpp");
    REQUIRE(exit_code_for(usage) == 2);
    REQUIRE(error_message(usage) == "--world must be positive");
  }
  const AgreedError agreed("[rank 2] file missing (src/io/file.cpp:10)", 2, 1);
  REQUIRE(std::string(agreed.what()) == "[rank 2] file missing (src/io/file.cpp:10)");
  // What an app prints: the rank and the reason; the location only at STRIDER_LOG_LEVEL=debug.
  const DataError data(ErrorContext{"", "src/io/h5_reader.cpp", 88, 3, 0, "the offsets do not increase"});
  const LogLevel level = log_level();
  set_log_level(LogLevel::info);
  CHECK(error_message(data) == "[rank 3] the offsets do not increase");
  set_log_level(LogLevel::debug);
  CHECK(error_message(data) == "[rank 3] the offsets do not increase (src/io/h5_reader.cpp:88)");
  set_log_level(level);
  REQUIRE(agreed.failing_rank() == 2);
  REQUIRE(exit_code_for(agreed) == 1);
  REQUIRE(exit_code_for(std::runtime_error("x")) == 1);
}

TEST_CASE("error kinds name the most derived error type, also through agreement", "[core][error]") {
  const auto kind_of = [](auto&& error) { return error_kind(error); };
  REQUIRE(kind_of(UsageError("x", __FILE__, __LINE__)) == ErrorKind::usage);
  REQUIRE(kind_of(DataError("x", __FILE__, __LINE__)) == ErrorKind::data);
  REQUIRE(kind_of(MpiError("x", __FILE__, __LINE__)) == ErrorKind::mpi);
  REQUIRE(kind_of(Hdf5Error("x", __FILE__, __LINE__)) == ErrorKind::hdf5);
  REQUIRE(kind_of(SystemError("x", __FILE__, __LINE__)) == ErrorKind::system);
  REQUIRE(kind_of(CudaError("x", __FILE__, __LINE__)) == ErrorKind::cuda);
  REQUIRE(kind_of(NcclError("x", __FILE__, __LINE__)) == ErrorKind::nccl);
  REQUIRE(kind_of(Error("x", __FILE__, __LINE__)) == ErrorKind::other);
  REQUIRE(kind_of(std::runtime_error("x")) == ErrorKind::other);
  REQUIRE(kind_of(AgreedError("m", 1, 1, ErrorKind::data, 4)) == ErrorKind::data);
  REQUIRE(AgreedError("m", 1, 1, ErrorKind::data, 4).ranks() == 4);
  // Without a kind, the exit code says what it can: 2 is a usage error.
  REQUIRE(kind_of(AgreedError("m", 0, 2)) == ErrorKind::usage);
  REQUIRE(kind_of(AgreedError("m", 0, 1)) == ErrorKind::other);
}

TEST_CASE("json writer", "[core][json]") {
  std::ostringstream out;
  JsonWriter json(out);
  json.begin_object();
  json.field("rank", 3);
  json.field("name", "a \"quoted\"\n");
  json.key("batches");
  json.begin_array();
  json.array(std::vector<std::int64_t>{1, 2});
  json.array(std::vector<std::int64_t>{});
  json.end_array();
  json.field("ratio", 0.5);
  json.field("nan", std::numeric_limits<double>::quiet_NaN());
  json.field("ok", true);
  json.end_object();
  REQUIRE(out.str() == R"({"rank":3,"name":"a \"quoted\"\n","batches":[[1,2],[]],"ratio":0.5,"nan":null,"ok":true})");
}

namespace {
int released_count = 0;
struct CountingTraits {
  using handle_type = int;
  static int null() noexcept { return -1; }
  static void release(int) noexcept { ++released_count; }
};
}  // namespace

TEST_CASE("unique handles release exactly once and move ownership", "[core][handle]") {
  released_count = 0;
  {
    UniqueHandle<CountingTraits> a(5);
    UniqueHandle<CountingTraits> b(std::move(a));
    REQUIRE(!a);
    REQUIRE(b.get() == 5);
    UniqueHandle<CountingTraits> c;
    c = std::move(b);
    REQUIRE(c.get() == 5);
    REQUIRE(released_count == 0);
    c.reset(7);
    REQUIRE(released_count == 1);
  }
  REQUIRE(released_count == 2);
  static_assert(!std::is_copy_constructible_v<UniqueHandle<CountingTraits>>);
}

TEST_CASE("log levels parse and bad ones are usage errors", "[core][log]") {
  REQUIRE(parse_log_level("debug") == LogLevel::debug);
  REQUIRE(parse_log_level("warn") == LogLevel::warn);
  REQUIRE_THROWS_AS(parse_log_level("loud"), UsageError);
  const LogLevel before = log_level();
  set_log_level(LogLevel::error);
  REQUIRE(log_level() == LogLevel::error);
  set_log_level(before);
}

TEST_CASE("FNV-1a 64 matches the reference values", "[core][hash]") {
  Fnv1a64 empty;
  REQUIRE(empty.value() == 0xcbf29ce484222325ULL);
  Fnv1a64 a;
  a.add_bytes("a", 1);
  REQUIRE(a.value() == 0xaf63dc4c8601ec8cULL);  // FNV-1a 64 of "a"
}

TEST_CASE("shared views: null or present, owning or borrowed", "[core][view]") {
  const SharedView<int> null;
  REQUIRE_FALSE(null);
  REQUIRE(null.empty());
  REQUIRE(null.begin() == null.end());
  const SharedView<int> none = nullptr;
  REQUIRE_FALSE(none);

  // From a shared vector: present, the vector's values, and the vector kept alive by the view.
  auto values = std::make_shared<const std::vector<int>>(std::vector<int>{3, 1, 2});
  const std::weak_ptr<const std::vector<int>> watch = values;
  SharedView<int> owning = values;
  values.reset();
  REQUIRE_FALSE(watch.expired());  // the view owns it now
  REQUIRE(owning);
  REQUIRE(owning.size() == 3);
  REQUIRE(owning[0] == 3);
  REQUIRE(owning.to_vector() == std::vector<int>{3, 1, 2});
  int sum = 0;
  for (int value : owning) sum += value;
  REQUIRE(sum == 6);
  SharedView<int> copy = owning;
  owning = nullptr;
  REQUIRE_FALSE(watch.expired());  // a copy shares the ownership
  copy = nullptr;
  REQUIRE(watch.expired());

  // An empty vector is present (a dataset of no rows), unlike a null view; a mutable vector works too.
  const SharedView<int> empty = std::make_shared<std::vector<int>>();
  REQUIRE(empty);
  REQUIRE(empty.empty());

  // Borrowed: the same values, owning nothing (the holder keeps them alive); an owner of any type.
  const std::vector<long> held = {7, 8};
  const SharedView<long> borrowed = SharedView<long>::borrow(held);
  REQUIRE(borrowed);
  REQUIRE(borrowed.data() == held.data());
  REQUIRE(borrowed.size() == 2);
  auto segment = std::make_shared<std::vector<char>>(16, 'x');
  const std::weak_ptr<std::vector<char>> segment_watch = segment;
  const SharedView<char> in_segment(segment, segment->data() + 4, 8);
  segment.reset();
  REQUIRE_FALSE(segment_watch.expired());
  REQUIRE(in_segment.size() == 8);
  REQUIRE(in_segment[7] == 'x');
}
