// --data: a list, a glob, a directory or @list.txt, expanded into shard files.
#include "strider/io/data_paths.hpp"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "strider/core/error.hpp"

namespace strider {
namespace {

bool is_directory(const std::string& path) {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

bool has_suffix(const std::string& name, const char* suffix) {
  const std::size_t length = std::strlen(suffix);
  return name.size() > length && name.compare(name.size() - length, length, suffix) == 0;
}

/// std::string's operator< compares as unsigned bytes (char_traits<char>::compare is memcmp-like):
/// the byte-wise order, whatever the locale.
void sort_bytewise(std::vector<std::string>& paths) {
  std::sort(paths.begin(), paths.end());
}

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t matches{};
  const int result = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::string> paths;
  if (result == 0)
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) paths.emplace_back(matches.gl_pathv[i]);
  ::globfree(&matches);
  if (result == GLOB_NOMATCH || (result == 0 && paths.empty()))
    STRIDER_THROW(UsageError, "--data: no file matches '" + pattern + "'");
  if (result != 0) STRIDER_THROW(UsageError, "--data: cannot expand '" + pattern + "' (glob failed)");
  sort_bytewise(paths);
  return paths;
}

std::vector<std::string> directory_files(const std::string& directory) {
  DIR* handle = ::opendir(directory.c_str());
  if (handle == nullptr)
    STRIDER_THROW(UsageError, "--data: cannot list the directory " + directory + ": " + std::strerror(errno));
  std::vector<std::string> paths;
  const std::string prefix = directory.back() == '/' ? directory : directory + "/";
  while (const dirent* entry = ::readdir(handle)) {
    const std::string name = entry->d_name;
    if (has_suffix(name, ".h5") || has_suffix(name, ".hdf5")) paths.push_back(prefix + name);
  }
  ::closedir(handle);
  if (paths.empty()) STRIDER_THROW(UsageError, "--data: the directory " + directory + " has no *.h5 or *.hdf5 files");
  sort_bytewise(paths);
  return paths;
}

std::vector<std::string> listed_files(const std::string& list) {
  std::ifstream file(list);
  if (!file) STRIDER_THROW(UsageError, "--data: cannot read the list @" + list + ": " + std::strerror(errno));
  std::vector<std::string> paths;
  std::string line;
  while (std::getline(file, line)) {
    const std::size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const std::size_t end = line.find_last_not_of(" \t\r");
    paths.push_back(line.substr(begin, end - begin + 1));
  }
  if (paths.empty()) STRIDER_THROW(UsageError, "--data: the list @" + list + " names no file");
  return paths;
}

void expand_item(const std::string& item, std::vector<std::string>& out) {
  if (item.empty()) STRIDER_THROW(UsageError, "--data: an empty name in the list of files");
  std::vector<std::string> paths;
  if (item.front() == '@') {
    paths = listed_files(item.substr(1));
  } else if (item.find_first_of("*?[") != std::string::npos) {
    paths = glob_matches(item);
  } else if (is_directory(item)) {
    paths = directory_files(item);
  } else {
    paths = {item};
  }
  out.insert(out.end(), paths.begin(), paths.end());
}

}  // namespace

std::vector<std::string> expand_data_paths(const std::string& spec) {
  if (spec.empty()) STRIDER_THROW(UsageError, "no dataset file given (--data)");
  // A file whose own name has a comma, a glob character or a leading '@' is that file.
  struct stat status {};
  if (::stat(spec.c_str(), &status) == 0 && S_ISREG(status.st_mode)) return {spec};
  std::vector<std::string> paths;
  std::size_t begin = 0;
  while (begin <= spec.size()) {
    std::size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    expand_item(spec.substr(begin, end - begin), paths);
    begin = end + 1;
  }
  std::set<std::string> seen;
  for (const std::string& path : paths)
    if (!seen.insert(path).second)
      STRIDER_THROW(UsageError, "--data names " + path + " twice (each shard once; a file's rows are read once)");
  return paths;
}

}  // namespace strider
