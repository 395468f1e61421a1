#pragma once
/// \file
/// The files a `--data` value names. A dataset may be split over many HDF5 files (one per run, per
/// day, per writer): its shards. Their rows are concatenated in the order given here, which is the
/// global index every sampler sees.

#include <string>
#include <vector>

namespace strider {

/// The shard files `spec` names, in order (a regular file named exactly `spec`, commas, glob
/// characters or a leading `@` in its name, is that one file):
/// - `a.h5,b.h5`: a comma-separated list; each item may be any of the forms below;
/// - `'train/*.h5'`: a glob (an item with `*`, `?` or `[`), its matches sorted byte-wise;
/// - `train/`: a directory, its `*.h5` and `*.hdf5` entries sorted byte-wise (not recursive);
/// - `@list.txt`: one path a line (relative paths relative to the current directory; blank lines
///   and lines starting with `#` skipped);
/// - anything else: one file (checked when it is opened, not here).
/// Throws UsageError with one line for an empty spec or item, a glob that matches nothing, a
/// directory without HDF5 files, a list that cannot be read or names no file, and a path named twice.
/// Not collective (open_reader expands on rank 0 and broadcasts the list); reads the file system.
std::vector<std::string> expand_data_paths(const std::string& spec);

}  // namespace strider
