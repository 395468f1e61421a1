// --data's forms: a comma list, a glob and a directory (both sorted byte-wise, whatever the locale),
// @list.txt, and one line for every way to name no file or a file twice.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <functional>

#include "strider/core/error.hpp"
#include "strider/io/data_paths.hpp"
#include "usage_error.hpp"

using namespace strider;
using strider::testing::usage_error_of;

namespace {

/// A scratch folder with files whose byte-wise order differs from a case-insensitive or numeric one.
struct Folder {
  std::string path;
  Folder() {
    char name[] = "/tmp/strider_paths_XXXXXX";
    path = mkdtemp(name);
    for (const char* file : {"b.h5", "a10.h5", "a9.h5", "B.h5", "c.hdf5", "notes.txt", "d.h5.bak"})
      std::ofstream(path + "/" + file) << "x";
    mkdir((path + "/sub").c_str(), 0700);
    std::ofstream(path + "/sub/e.h5") << "x";
  }
  ~Folder() { static_cast<void>(std::system(("rm -rf " + path).c_str())); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

}  // namespace

TEST_CASE("--data: one file, a comma list, a glob and a directory, in byte-wise order", "[data_paths]") {
  const Folder folder;
  CHECK(expand_data_paths("x.h5") == std::vector<std::string>{"x.h5"});  // existence is open_reader's check
  CHECK(expand_data_paths(folder / "b.h5," + folder / "a9.h5") ==
        std::vector<std::string>{folder / "b.h5", folder / "a9.h5"});
  // 'B' (0x42) < 'a' (0x61) < 'b'; "a10" < "a9" byte by byte.
  const std::vector<std::string> globbed = {folder / "B.h5", folder / "a10.h5", folder / "a9.h5", folder / "b.h5"};
  CHECK(expand_data_paths(folder / "*.h5") == globbed);
  CHECK(expand_data_paths(folder / "a?*.h5") == std::vector<std::string>{folder / "a10.h5", folder / "a9.h5"});
  const std::vector<std::string> listed = {folder / "B.h5", folder / "a10.h5", folder / "a9.h5", folder / "b.h5",
                                           folder / "c.hdf5"};
  CHECK(expand_data_paths(folder.path) == listed);  // *.h5 and *.hdf5, not notes.txt, d.h5.bak or sub/
  CHECK(expand_data_paths(folder.path + "/") == listed);
  // Items of a list may be globs and directories too, in the order given.
  CHECK(expand_data_paths(folder / "*.hdf5," + folder / "sub") ==
        std::vector<std::string>{folder / "c.hdf5", folder / "sub/e.h5"});
}

TEST_CASE("--data: a file named with a comma, glob characters or a leading '@' is that file", "[data_paths]") {
  const Folder folder;
  for (const char* name : {"a,b.h5", "star[1].h5", "@at.h5", "what?.h5"}) {
    std::ofstream(folder / name) << "x";
    CHECK(expand_data_paths(folder / name) == std::vector<std::string>{folder / name});
  }
  // Without such a file the forms apply: "a,b.h5" is a list, and its items need not exist yet.
  CHECK(expand_data_paths(folder / "c,d.h5") == std::vector<std::string>{folder / "c", "d.h5"});
}

TEST_CASE("--data @list.txt: one path a line, blank lines and comments skipped", "[data_paths]") {
  const Folder folder;
  std::ofstream(folder / "list.txt") << "# shards\n"
                                     << folder / "b.h5"
                                     << "\n\n  " << folder / "a9.h5"
                                     << "  \r\n";
  CHECK(expand_data_paths("@" + folder / "list.txt") == std::vector<std::string>{folder / "b.h5", folder / "a9.h5"});
  std::ofstream(folder / "empty.txt") << "# nothing\n\n";
  CHECK(usage_error_of([&] { expand_data_paths("@" + folder / "empty.txt"); }) ==
        "--data: the list @" + folder / "empty.txt" + " names no file");
  CHECK(usage_error_of([&] { expand_data_paths("@" + folder / "missing.txt"); }) ==
        "--data: cannot read the list @" + folder / "missing.txt" + ": No such file or directory");
}

TEST_CASE("--data: no file named, or one named twice, is one line", "[data_paths]") {
  const Folder folder;
  CHECK(usage_error_of([] { expand_data_paths(""); }) == "no dataset file given (--data)");
  CHECK(usage_error_of([&] { expand_data_paths(folder / "*.nc"); }) ==
        "--data: no file matches '" + folder / "*.nc" + "'");
  CHECK(usage_error_of([&] { expand_data_paths(folder / "sub/x*"); }) ==
        "--data: no file matches '" + folder / "sub/x*" + "'");
  mkdir((folder / "none").c_str(), 0700);
  CHECK(usage_error_of([&] { expand_data_paths(folder / "none"); }) ==
        "--data: the directory " + folder / "none" + " has no *.h5 or *.hdf5 files");
  CHECK(usage_error_of([&] { expand_data_paths("a.h5,,b.h5"); }) == "--data: an empty name in the list of files");
  CHECK(usage_error_of([&] { expand_data_paths(folder / "b.h5," + folder / "*.h5"); }) ==
        "--data names " + folder / "b.h5" + " twice (each shard once; a file's rows are read once)");
}
