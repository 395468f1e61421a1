// open_reader: the shard list (rank 0 expands --data), local checks on every rank, validation of
// every shard on rank 0 (shapes, types, labels and offsets, opened on its own with HDF5's default
// driver), the layout broadcast, and the engine choice. Every failure is agreed across ranks.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "io/chunk_inflate.hpp"
#include "io/reader_detail.hpp"
#include "io/vlen_sequences.hpp"
#include "strider/core/log.hpp"
#include "strider/core/option_text.hpp"
#include "strider/io/data_paths.hpp"

namespace strider {
namespace io_detail {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why, const char* file, int line) {
  throw DataError("cannot open " + path + ": " + why, file, line);
}
#define STRIDER_DATA_FAIL(why) fail(dataset.path, why, ::strider::detail::relative_source_path(__FILE__), __LINE__)

/// Checks on this rank only, before rank 0 validates: the shard exists here and is a regular file
/// that this process may read (a file missing on one rank only fails on every rank, by name).
/// `what` names it: the path, or "shard PATH (2 of 8)".
void check_local_file(const std::string& path, const std::string& what) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0 || ::access(path.c_str(), R_OK) != 0)
    throw DataError("cannot open " + what + ": " + std::strerror(errno), detail::relative_source_path(__FILE__),
                    __LINE__);
  if (!S_ISREG(status.st_mode))
    throw DataError("cannot open " + what + ": not a regular file", detail::relative_source_path(__FILE__), __LINE__);
}

/// Rank 0, before opening it with HDF5: the file is HDF5.
void check_hdf5_file(const std::string& path, const std::string& what) {
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is_hdf5 <= 0)
    throw DataError("cannot open " + what + ": not an HDF5 file", detail::relative_source_path(__FILE__), __LINE__);
}

/// True when every component of `key` exists as a link (H5Lexists fails on a missing parent).
bool link_exists(hid_t file, const std::string& key) {
  std::string prefix;
  std::size_t begin = key.front() == '/' ? 1 : 0;
  prefix = key.front() == '/' ? "" : ".";
  while (begin <= key.size()) {
    std::size_t end = key.find('/', begin);
    if (end == std::string::npos) end = key.size();
    if (end > begin) {
      prefix += "/" + key.substr(begin, end - begin);
      if (STRIDER_H5_CHECK(H5Lexists(file, prefix.c_str(), H5P_DEFAULT), "looking up " + prefix) <= 0) return false;
    }
    begin = end + 1;
  }
  return true;
}

/// The datasets a file holds, for the message that a named one is missing: "; the file holds /x
/// [1000, 64], /y [1000]" (the first 12 by name, then how many more), or "; the file holds no
/// dataset".
std::string datasets_held(hid_t file) {
  struct Found {
    std::vector<std::string> names;
    std::int64_t count = 0;
  } found;
  const auto visit = [](hid_t group, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    auto& into = *static_cast<Found*>(data);
    if (info->type != H5L_TYPE_HARD) return 0;
    const hid_t opened = H5Dopen2(group, name, H5P_DEFAULT);  // a group is not a dataset: skipped
    if (opened < 0) return 0;
    ++into.count;
    if (into.names.size() < 12) {
      std::vector<std::int64_t> shape;
      const hid_t space = H5Dget_space(opened);
      const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
      std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
      if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) >= 0)
        shape.assign(dims.begin(), dims.end());
      if (space >= 0) H5Sclose(space);
      into.names.push_back("/" + std::string(name) + " " + format_shape(shape));
    }
    H5Dclose(opened);
    return 0;
  };
  if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit, &found) < 0 || found.count == 0)
    return "; the file holds no dataset";
  std::string text = "; the file holds ";
  for (std::size_t i = 0; i < found.names.size(); ++i) text += (i ? ", " : "") + found.names[i];
  if (found.count > static_cast<std::int64_t>(found.names.size()))
    text += " and " + std::to_string(found.count - static_cast<std::int64_t>(found.names.size())) + " more";
  return text;
}

/// Why a 2-byte float type is not IEEE 754 binary16, checked field by field (HDF5 1.10 has no half
/// type to compare with: a file's float16 is whatever bit layout its writer described); "" when it
/// is. Either byte order is fine.
std::string float16_refusal(hid_t type) {
  std::size_t sign = 0, exponent_position = 0, exponent_bits = 0, mantissa_position = 0, mantissa_bits = 0;
  STRIDER_H5_CHECK(H5Tget_fields(type, &sign, &exponent_position, &exponent_bits, &mantissa_position, &mantissa_bits),
                   "reading the bit fields of a 2-byte float");
  const std::size_t bias = H5Tget_ebias(type);
  const H5T_norm_t norm = STRIDER_H5_CHECK(H5Tget_norm(type), "reading the normalization of a 2-byte float");
  const int precision = static_cast<int>(H5Tget_precision(type));
  const int offset = STRIDER_H5_CHECK(H5Tget_offset(type), "reading the bit offset of a 2-byte float");
  if (sign == 15 && exponent_position == 10 && exponent_bits == 5 && mantissa_position == 0 && mantissa_bits == 10 &&
      bias == 15 && norm == H5T_NORM_IMPLIED && precision == 16 && offset == 0)
    return "";
  if (exponent_bits == 8 && mantissa_bits == 7 && bias == 127) return "bfloat16 (8 exponent bits, 7 mantissa bits)";
  return "a 2-byte float that is not IEEE binary16 (sign bit " + std::to_string(sign) + ", " +
         std::to_string(exponent_bits) + " exponent bits at " + std::to_string(exponent_position) + ", " +
         std::to_string(mantissa_bits) + " mantissa bits at " + std::to_string(mantissa_position) + ", bias " +
         std::to_string(bias) + ")";
}

/// The element type of a stored integer or float type; throws DataError for anything else.
ElementType element_type_of(const OpenedDataset& dataset, hid_t type, const std::string& key) {
  const H5T_class_t type_class = STRIDER_H5_CHECK(H5Tget_class(type), "reading the type of " + key);
  const std::size_t bytes = H5Tget_size(type);
  if (type_class == H5T_INTEGER) {
    const bool is_signed = STRIDER_H5_CHECK(H5Tget_sign(type), "reading the sign of " + key) == H5T_SGN_2;
    switch (bytes) {
      case 1:
        return is_signed ? ElementType::int8 : ElementType::uint8;
      case 2:
        return is_signed ? ElementType::int16 : ElementType::uint16;
      case 4:
        return is_signed ? ElementType::int32 : ElementType::uint32;
      case 8:
        return is_signed ? ElementType::int64 : ElementType::uint64;
      default:
        break;
    }
  } else if (type_class == H5T_FLOAT) {
    if (bytes == 4) return ElementType::float32;
    if (bytes == 8) return ElementType::float64;
    if (bytes == 2) {
      const std::string why = float16_refusal(type);
      if (why.empty()) return ElementType::float16;
      STRIDER_DATA_FAIL(key + " holds " + why + "; strider reads IEEE 754 binary16 (np.float16) as its 2-byte float");
    }
  }
  if (type_class == H5T_VLEN)
    STRIDER_DATA_FAIL(key + " holds variable-length sequences (h5py vlen_dtype): strider reads them as token " +
                      "sequences, named with --tokens-key (and no --offsets-key dataset in the file)");
  const char* names[] = {"integer",  "float",     "time", "string", "bitfield", "opaque",
                         "compound", "reference", "enum", "vlen",   "array"};
  const std::string name = type_class >= 0 && type_class < 11 ? names[type_class] : "unknown";
  STRIDER_DATA_FAIL(key + " has an unsupported type (" + std::to_string(bytes) + "-byte " + name +
                    "); strider reads 1, 2, 4 or 8-byte integers and 2 (IEEE float16), 4 or 8-byte floats");
}

struct DatasetHandles {
  H5Dataset dataset;
  std::vector<std::int64_t> dims;
  ElementType type = ElementType::float32;
  bool native = false;  // stored type equals the native one (byte order included)
};

/// Opens dataset `key`: its shape and element type (`vlen`: of its variable-length sequences, which
/// must hold integers, else one line says what is read and why).
DatasetHandles open_dataset(const OpenedDataset& dataset, hid_t file, const std::string& key, bool vlen = false) {
  DatasetHandles handles;
  handles.dataset.reset(
      STRIDER_H5_CHECK(H5Dopen2(file, key.c_str(), H5P_DEFAULT), "opening " + key + " (is it a dataset?)"));
  H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(handles.dataset.get()), "reading the shape of " + key));
  const int rank = STRIDER_H5_CHECK(H5Sget_simple_extent_ndims(space.get()), "reading the rank of " + key);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0)
    STRIDER_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "reading the shape of " + key);
  handles.dims.assign(dims.begin(), dims.end());
  H5Datatype type(STRIDER_H5_CHECK(H5Dget_type(handles.dataset.get()), "reading the type of " + key));
  if (vlen) {
    handles.type = vlen_element_type(dataset.path, type.get(), key, handles.native);
    return handles;
  }
  handles.type = element_type_of(dataset, type.get(), key);
  handles.native = STRIDER_H5_CHECK(H5Tequal(type.get(), native_hdf5_type(handles.type)), "comparing types") > 0;
  return handles;
}

/// True when dataset `key` of the file has a variable-length type (h5py's vlen_dtype or strings).
bool is_vlen_dataset(hid_t file, const std::string& key) {
  H5Dataset opened(
      STRIDER_H5_CHECK(H5Dopen2(file, key.c_str(), H5P_DEFAULT), "opening " + key + " (is it a dataset?)"));
  H5Datatype type(STRIDER_H5_CHECK(H5Dget_type(opened.get()), "reading the type of " + key));
  return is_variable_length_type(type.get());
}

const char* layout_name(H5D_layout_t layout) {
  return layout == H5D_CHUNKED      ? "chunked"
         : layout == H5D_COMPACT    ? "compact"
         : layout == H5D_CONTIGUOUS ? "contiguous"
                                    : "other";
}

/// Why a dataset cannot be read with pread at a file offset ("" when it can), the one test for the
/// samples (direct/mmap engines) and the labels (read per batch): it must be contiguous (hence
/// unfiltered), in this file, allocated, and stored in the native type. Sets `offset` whenever the
/// dataset is contiguous and allocated.
std::string raw_refusal(hid_t dataset_id, const std::string& key, bool native, ElementType type, std::int64_t& offset) {
  H5PropertyList create(STRIDER_H5_CHECK(H5Dget_create_plist(dataset_id), "reading the creation properties of " + key));
  const H5D_layout_t layout = STRIDER_H5_CHECK(H5Pget_layout(create.get()), "reading the layout of " + key);
  const int filters = STRIDER_H5_CHECK(H5Pget_nfilters(create.get()), "reading the filters of " + key);
  const int external = STRIDER_H5_CHECK(H5Pget_external_count(create.get()), "reading the external files of " + key);
  const haddr_t address = H5Dget_offset(dataset_id);
  H5Eclear2(H5E_DEFAULT);  // H5Dget_offset fails quietly for non-contiguous layouts
  if (layout == H5D_CONTIGUOUS && address != HADDR_UNDEF) offset = static_cast<std::int64_t>(address);
  if (layout != H5D_CONTIGUOUS) return key + " is " + layout_name(layout) + (filters > 0 ? " and compressed" : "");
  if (external > 0) return key + " is stored in external files";
  if (address == HADDR_UNDEF) return key + " has no storage allocated";
  if (!native) return key + " is stored as a non-native " + element_name(type) + " (other byte order)";
  return "";
}

/// A filter as a user names it: HDF5's own by their h5py names, any other by the name it registered.
std::string filter_name(H5Z_filter_t filter, const char* registered) {
  switch (filter) {
    case H5Z_FILTER_DEFLATE:
      return "deflate";
    case H5Z_FILTER_SHUFFLE:
      return "shuffle";
    case H5Z_FILTER_FLETCHER32:
      return "fletcher32";
    case H5Z_FILTER_SZIP:
      return "szip";
    case H5Z_FILTER_NBIT:
      return "nbit";
    case H5Z_FILTER_SCALEOFFSET:
      return "scaleoffset";
    default:
      return registered[0] != '\0' ? registered : "filter " + std::to_string(filter);
  }
}

/// Layout, chunking, filters and (for contiguous data) the file offset of the data dataset of one
/// file, into its shard layout (and the file's info).
void inspect_layout(OpenedDataset& dataset, ShardLayout& shard, hid_t data, bool native) {
  H5PropertyList create(
      STRIDER_H5_CHECK(H5Dget_create_plist(data), "reading the creation properties of " + dataset.data_key));
  const H5D_layout_t layout =
      STRIDER_H5_CHECK(H5Pget_layout(create.get()), "reading the layout of " + dataset.data_key);
  if (layout == H5D_VIRTUAL)
    STRIDER_DATA_FAIL(dataset.data_key +
                      " is a virtual dataset; strider resolves virtual fixed-size samples (--data-key) into their "
                      "sources, not virtual sequences or sources that are virtual again: list the files as shards");
  DatasetInfo& info = dataset.info;
  info.layout = shard.layout = layout_name(layout);
  const int filters = STRIDER_H5_CHECK(H5Pget_nfilters(create.get()), "reading the filters of " + dataset.data_key);
  info.compressed = shard.compressed = filters > 0;
  std::int32_t deflate = -1, shuffle = -1;
  bool other_filters = false;
  std::string names;  // "shuffle + deflate"
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t values = 1;
    unsigned value = 0;
    char name[64] = {0};
    const H5Z_filter_t filter =
        H5Pget_filter2(create.get(), static_cast<unsigned>(i), &flags, &values, &value, sizeof name, name, nullptr);
    if (filter < 0 || H5Zfilter_avail(filter) <= 0)
      STRIDER_DATA_FAIL(dataset.data_key + " is compressed with filter " + std::to_string(filter) + " (" + name +
                        ") that this HDF5 library does not have");
    names += (i > 0 ? " + " : "") + filter_name(filter, name);
    // Shuffle's one value is the element size it shuffled by (set when the dataset was created).
    if (filter == H5Z_FILTER_DEFLATE && deflate < 0) {
      deflate = i;
    } else if (filter == H5Z_FILTER_SHUFFLE && i == 0 && values >= 1 &&
               value == static_cast<unsigned>(element_bytes(info.element_type))) {
      shuffle = i;
    } else {
      other_filters = true;
    }
  }
  if (layout == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(dataset.dims.size());
    STRIDER_H5_CHECK(H5Pget_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data()),
                     "reading the chunk shape of " + dataset.data_key);
    info.chunk_shape.assign(chunk.begin(), chunk.end());
    shard.chunk_rows = info.chunk_shape[0];
    for (std::size_t d = 1; d < chunk.size(); ++d)
      shard.chunks_across_row *= (dataset.dims[d] + info.chunk_shape[d] - 1) / info.chunk_shape[d];
    H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(data), "reading the shape of " + dataset.data_key));
    hsize_t chunks = 0;
    STRIDER_H5_CHECK(H5Dget_num_chunks(data, space.get(), &chunks), "counting the chunks of " + dataset.data_key);
    const hsize_t stored = H5Dget_storage_size(data);
    if (chunks > 0) shard.average_chunk_storage_bytes = static_cast<std::int64_t>(stored / chunks);
    // Chunks strider can inflate itself: native fixed-size rows (whole rows per chunk) or flat tokens,
    // deflate last (after an optional shuffle), and partial edge chunks filtered like the others.
    unsigned chunk_options = 0;
    STRIDER_H5_CHECK(H5Pget_chunk_opts(create.get(), &chunk_options),
                     "reading the chunk options of " + dataset.data_key);
    const std::string why_not =
        deflate < 0 || deflate != filters - 1 || other_filters ? "filters other than deflate, after shuffle or alone"
        : shard.vlen                                           ? "h5py variable-length sequences"
        : !native                                              ? "a non-native byte order"
        : shard.chunks_across_row != 1                         ? "chunks that split each row"
        : (chunk_options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) != 0 ? "edge chunks stored unfiltered"
                                                                      : "";
    if (why_not.empty()) {
      shard.deflate_filter = deflate;
      shard.shuffle_filter = shuffle;
    }
    if (filters > 0)
      info.compression =
          names + (why_not.empty() ? std::string(", inflated by strider with ") + ChunkInflater::library()
                                   : ", through HDF5's filters (" + why_not + ")");
  } else if (filters > 0) {
    info.compression = names + ", through HDF5's filters";
  }
  shard.raw_refusal = raw_refusal(data, dataset.data_key, native, info.element_type, shard.file_offset_bytes);
  shard.raw_readable = shard.raw_refusal.empty();
  if (shard.raw_readable) {
    // The bytes must be in the file (HDF5 notices most truncations at open, not all).
    struct stat status {};
    const std::int64_t bytes = shard.elements * static_cast<std::int64_t>(element_bytes(info.element_type));
    if (::stat(dataset.path.c_str(), &status) == 0 && shard.file_offset_bytes + bytes > status.st_size)
      STRIDER_DATA_FAIL(dataset.data_key + " needs bytes " + std::to_string(shard.file_offset_bytes) + ".." +
                        std::to_string(shard.file_offset_bytes + bytes) + " but the file has " +
                        std::to_string(status.st_size) + " (truncated?)");
  }
}

/// A file without the labels dataset `options.keys.labels`: an error where a class-aware mode needs
/// labels or where the user named one other than the default (a misspelt name must not read the data
/// as unlabelled); otherwise the data has no labels.
void check_missing_labels(const OpenedDataset& dataset, hid_t file, const ReaderOptions& options) {
  const std::string& key = options.keys.labels;
  if (options.require_labels && key == kNoLabelsKey)
    STRIDER_DATA_FAIL("--label-key none reads no labels, but " + options.labels_needed_by + " needs them");
  if (options.require_labels)
    STRIDER_DATA_FAIL("no labels dataset " + key + ", which " + options.labels_needed_by +
                      " needs (name it with --label-key)" + datasets_held(file));
  if (key != kNoLabelsKey && key != kDefaultLabelsKey)
    STRIDER_DATA_FAIL("no labels dataset " + key + " (named by --label-key; --label-key none reads no labels)" +
                      datasets_held(file));
}

/// The datasets of one validated file: its data and the labels/offsets datasets it has.
struct OpenedFile {
  H5Dataset data, labels, offsets;
};

/// Validates everything in one open file but the values of labels and offsets, filling the file's
/// own view (`dataset`, path = the file) and its shard layout. `with_labels` false: the file's
/// labels are not looked at (a virtual dataset's sources: the labels are the virtual file's).
OpenedFile open_and_validate(hid_t file, OpenedDataset& dataset, ShardLayout& shard, const ReaderOptions& options,
                             bool with_labels = true) {
  OpenedFile opened;
  const DatasetKeys& keys = options.keys;
  DatasetInfo& info = dataset.info;

  // A name given for one layout chooses it: sequences named with --tokens-key/--offsets-key are not
  // passed over for a /samples the file also has (a silent wrong answer); naming both is refused.
  const DatasetKeys defaults;
  const bool sequences_named = keys.tokens != defaults.tokens || keys.offsets != defaults.offsets;
  if (sequences_named && keys.data != defaults.data)
    STRIDER_DATA_FAIL("--data-key " + keys.data + " names fixed-size samples and --tokens-key/--offsets-key (" +
                      keys.tokens + ", " + keys.offsets + ") sequences: name one");
  DatasetHandles data;
  if (!sequences_named && link_exists(file, keys.data)) {
    dataset.data_key = keys.data;
    data = open_dataset(dataset, file, keys.data);
    if (data.dims.empty()) STRIDER_DATA_FAIL(keys.data + " is a scalar; expected [N, ...]");
    info.num_samples = data.dims[0];
    info.sample_shape.assign(data.dims.begin() + 1, data.dims.end());
    dataset.row_elements = 1;
    for (std::int64_t extent : info.sample_shape) dataset.row_elements *= extent;
    if (info.num_samples == 0 || dataset.row_elements == 0)
      STRIDER_DATA_FAIL(keys.data + " is empty (shape " + format_shape(data.dims) + ")");
  } else if (link_exists(file, keys.tokens) && is_vlen_dataset(file, keys.tokens)) {
    if (link_exists(file, keys.offsets))
      STRIDER_DATA_FAIL(keys.tokens + " holds variable-length sequences (h5py vlen_dtype), which need no " +
                        keys.offsets + ", but the file has one too: name one layout (--tokens-key, --offsets-key)");
    info.variable_length = true;
    dataset.data_key = keys.tokens;
    data = open_dataset(dataset, file, keys.tokens, true);
    if (data.dims.size() != 1)
      STRIDER_DATA_FAIL(keys.tokens + " must be one-dimensional (one sequence per row), has shape " +
                        format_shape(data.dims));
    if (data.dims[0] == 0) STRIDER_DATA_FAIL(keys.tokens + " is empty (no sequences)");
    info.num_samples = data.dims[0];
    const std::vector<std::int64_t> lengths =
        read_vlen_lengths(data.dataset.get(), data.type, info.num_samples, keys.tokens + " of " + dataset.path);
    dataset.offsets.assign(1, 0);
    for (std::int64_t length : lengths) dataset.offsets.push_back(dataset.offsets.back() + length);
    info.num_tokens = dataset.offsets.back();
    shard.vlen = true;
  } else if (link_exists(file, keys.tokens)) {
    if (!link_exists(file, keys.offsets))
      STRIDER_DATA_FAIL("it has " + keys.tokens + " but no " + keys.offsets + " (sequences need both)");
    info.variable_length = true;
    dataset.data_key = keys.tokens;
    data = open_dataset(dataset, file, keys.tokens);
    if (data.dims.size() != 1)
      STRIDER_DATA_FAIL(keys.tokens + " must be one-dimensional, has shape " + format_shape(data.dims));
    info.num_tokens = data.dims[0];
    DatasetHandles offsets = open_dataset(dataset, file, keys.offsets);
    if (offsets.dims.size() != 1)
      STRIDER_DATA_FAIL(keys.offsets + " must be one-dimensional, has shape " + format_shape(offsets.dims));
    if (element_name(offsets.type)[0] == 'f')
      STRIDER_DATA_FAIL(keys.offsets + " must hold integers, has " + element_name(offsets.type));
    if (offsets.dims[0] < 2)
      STRIDER_DATA_FAIL(keys.offsets + " has " + std::to_string(offsets.dims[0]) + " entries: the dataset is empty");
    info.num_samples = offsets.dims[0] - 1;
    opened.offsets = std::move(offsets.dataset);
  } else if (sequences_named) {
    STRIDER_DATA_FAIL("no dataset " + keys.tokens + " (the sequences named by --tokens-key/--offsets-key)" +
                      datasets_held(file));
  } else {
    STRIDER_DATA_FAIL("no dataset " + keys.data + " (fixed-size samples) nor " + keys.tokens + " + " + keys.offsets +
                      " (sequences); name yours with --data-key or --tokens-key/--offsets-key" + datasets_held(file));
  }
  info.element_type = data.type;
  info.sample_bytes =
      info.variable_length ? 0 : dataset.row_elements * static_cast<std::int64_t>(element_bytes(data.type));
  dataset.dims = data.dims;

  if (!with_labels) {
    // the labels are someone else's
  } else if (keys.labels != kNoLabelsKey && link_exists(file, keys.labels)) {
    DatasetHandles labels = open_dataset(dataset, file, keys.labels);
    if (labels.dims.size() != 1)
      STRIDER_DATA_FAIL(keys.labels + " must be one-dimensional, has shape " + format_shape(labels.dims));
    if (element_name(labels.type)[0] == 'f')
      STRIDER_DATA_FAIL(keys.labels + " must hold integers, has " + element_name(labels.type));
    if (labels.dims[0] != info.num_samples)
      STRIDER_DATA_FAIL("labels " + keys.labels + " has " + std::to_string(labels.dims[0]) + " entries but there are " +
                        std::to_string(info.num_samples) + " samples" +
                        (info.variable_length ? " (offsets " + keys.offsets + " has " +
                                                    std::to_string(info.num_samples + 1) + " entries)"
                                              : ""));
    info.has_labels = true;
    if (!options.labels_in_memory) {
      const std::string why_not =
          raw_refusal(labels.dataset.get(), keys.labels, labels.native, labels.type, dataset.labels_offset_bytes);
      if (why_not.empty()) {
        info.labels_per_batch = dataset.labels_per_batch = true;
        dataset.labels_key = keys.labels;
        dataset.label_type = labels.type;
      } else {
        log_info("holding the labels in memory: they cannot be read per batch because ", why_not);
      }
    }
    opened.labels = std::move(labels.dataset);
  } else {
    check_missing_labels(dataset, file, options);
  }
  shard.path = dataset.path;
  shard.data_key = dataset.data_key;
  shard.rows = info.num_samples;
  shard.elements = info.variable_length ? info.num_tokens : info.num_samples * dataset.row_elements;
  inspect_layout(dataset, shard, data.dataset.get(), data.native && !shard.vlen);
  if (shard.vlen) {
    // The values live in HDF5's global heap, one object per row: no file offset to pread or map.
    shard.raw_readable = false;
    shard.file_offset_bytes = -1;
    shard.raw_refusal = keys.tokens +
                        " holds h5py variable-length sequences, which only the hdf5 engine reads (strider-convert "
                        "rewrites them as tokens + offsets for direct and mmap)";
  }
  opened.data = std::move(data.dataset);
  return opened;
}

/// Reads a whole one-dimensional integer dataset as int64.
std::vector<std::int64_t> read_int64(hid_t dataset_id, std::int64_t count, const std::string& what) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(count));
  STRIDER_H5_CHECK(H5Dread(dataset_id, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                   "reading " + what);
  return values;
}

/// Reads one file's labels and offsets and checks their values.
void read_labels_and_offsets(OpenedDataset& dataset, const OpenedFile& opened, const ReaderOptions& options) {
  const std::int64_t rows = dataset.info.num_samples;
  if (opened.labels && !dataset.labels_per_batch) {
    const std::vector<std::int64_t> labels = read_int64(opened.labels.get(), rows, options.keys.labels);
    dataset.labels.resize(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < std::numeric_limits<std::int32_t>::min() || labels[i] > std::numeric_limits<std::int32_t>::max())
        STRIDER_DATA_FAIL(options.keys.labels + "[" + std::to_string(i) + "] = " + std::to_string(labels[i]) +
                          " does not fit int32");
      dataset.labels[i] = static_cast<std::int32_t>(labels[i]);
    }
  }
  if (opened.offsets) {
    dataset.offsets = read_int64(opened.offsets.get(), rows + 1, options.keys.offsets);
    const auto& offsets = dataset.offsets;
    if (offsets[0] < 0)
      STRIDER_DATA_FAIL(options.keys.offsets + "[0] = " + std::to_string(offsets[0]) + " is negative");
    for (std::int64_t i = 0; i < rows; ++i) {
      if (offsets[i + 1] < offsets[i])
        STRIDER_DATA_FAIL(options.keys.offsets + " is not non-decreasing: [" + std::to_string(i) +
                          "] = " + std::to_string(offsets[i]) + ", [" + std::to_string(i + 1) +
                          "] = " + std::to_string(offsets[i + 1]));
    }
    if (offsets[rows] > dataset.info.num_tokens)
      STRIDER_DATA_FAIL(options.keys.offsets + "[" + std::to_string(rows) + "] = " + std::to_string(offsets[rows]) +
                        " is past the end of " + options.keys.tokens + " (" + std::to_string(dataset.info.num_tokens) +
                        " tokens)");
  }
}

/// "a.h5" for a single file, "shard a.h5 (2 of 8)" among several.
std::string shard_name(const std::vector<std::string>& paths, std::size_t index) {
  if (paths.size() == 1) return paths[0];
  return "shard " + paths[index] + " (" + std::to_string(index + 1) + " of " + std::to_string(paths.size()) + ")";
}

/// What a shard holds, for the line that says how two shards differ.
std::string contents_text(const DatasetInfo& info, const std::string& data_key) {
  std::string text = info.variable_length
                         ? "sequences of " + std::string(element_name(info.element_type)) + " tokens in " + data_key
                         : std::string(element_name(info.element_type)) + " samples of shape " +
                               format_shape(info.sample_shape) + " in " + data_key;
  return text + (info.has_labels ? " with labels" : " without labels");
}

/// Appends one validated file (its own view and layout) to the whole dataset: the first defines
/// what the others must hold; rows, labels and token offsets are concatenated.
void append_shard(OpenedDataset& whole, OpenedDataset& file, ShardLayout shard, const std::string& what) {
  DatasetInfo& info = whole.info;
  if (whole.shards.empty()) {
    const std::string path = whole.path;
    whole = std::move(file);
    whole.path = info.path = path;
    shard.first_row = 0;
    shard.first_element = 0;  // the first file's own offsets are the global ones
    whole.raw_readable = shard.raw_readable;
    whole.raw_refusal = shard.raw_refusal;
    whole.shards.push_back(std::move(shard));
    return;
  }
  const ShardLayout& first = whole.shards.front();
  const std::string mine = contents_text(file.info, file.data_key), theirs = contents_text(info, whole.data_key);
  if (mine != theirs)
    STRIDER_THROW(DataError, "cannot open " + whole.path + ": " + what + " has " + mine + ", but " + first.path +
                                 " has " + theirs + " (all shards need the same datasets, per-sample shape and type)");
  const std::int64_t rows = file.info.num_samples;
  shard.first_row = info.num_samples;
  if (info.variable_length) {
    const std::int64_t base = whole.offsets.back();
    shard.first_element = base - file.offsets.front();
    for (std::int64_t i = 1; i <= rows; ++i) whole.offsets.push_back(base + file.offsets[i] - file.offsets.front());
  } else {
    shard.first_element = shard.first_row * whole.row_elements;
  }
  whole.labels.insert(whole.labels.end(), file.labels.begin(), file.labels.end());
  info.num_samples += rows;
  info.num_tokens += file.info.num_tokens;
  whole.dims[0] += rows;
  if (info.layout != file.info.layout) info.layout = "mixed";
  if (info.chunk_shape != file.info.chunk_shape) info.chunk_shape.clear();
  info.compressed = info.compressed || file.info.compressed;
  if (info.compression != file.info.compression) info.compression = "mixed";
  if (whole.raw_readable && !shard.raw_readable) {
    whole.raw_readable = false;
    whole.raw_refusal = shard.raw_refusal + " in " + shard.path;
  }
  whole.shards.push_back(std::move(shard));
}

/// A whole source dataset that a virtual dataset maps to its rows [first_row, first_row + rows).
struct VirtualSource {
  std::string path;     ///< the source file, found
  std::string dataset;  ///< the dataset in it
  std::int64_t first_row = 0, rows = 0;
};

/// The box a selection covers, [start, end] per dimension; false when it is not exactly one box.
bool selection_box(hid_t space, std::vector<hsize_t>& start, std::vector<hsize_t>& end) {
  const int rank = STRIDER_H5_CHECK(H5Sget_simple_extent_ndims(space), "reading a selection's rank");
  start.assign(static_cast<std::size_t>(rank), 0);
  end.assign(static_cast<std::size_t>(rank), 0);
  if (H5Sget_select_type(space) == H5S_SEL_ALL) {
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    STRIDER_H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "reading a selection's extent");
    for (std::size_t d = 0; d < dims.size(); ++d) end[d] = dims[d] - 1;
    return std::find(dims.begin(), dims.end(), 0) == dims.end();
  }
  if (H5Sget_select_bounds(space, start.data(), end.data()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  hssize_t box = 1;
  for (std::size_t d = 0; d < start.size(); ++d) box *= static_cast<hssize_t>(end[d] - start[d] + 1);
  return H5Sget_select_npoints(space) == box;
}

/// The text of a string a virtual mapping holds (`get` is H5Pget_virtual_filename or _dsetname).
std::string mapping_text(ssize_t (*get)(hid_t, std::size_t, char*, std::size_t), hid_t create, std::size_t index) {
  const ssize_t size = STRIDER_H5_CHECK(get(create, index, nullptr, 0), "reading a virtual mapping");
  std::string text(static_cast<std::size_t>(size) + 1, '\0');
  STRIDER_H5_CHECK(get(create, index, text.data(), text.size()), "reading a virtual mapping");
  text.resize(static_cast<std::size_t>(size));
  return text;
}

/// Where HDF5 would look for a virtual dataset's relative source `name`: the virtual file's own
/// folder, then the current directory; "" when it is in neither.
std::string find_source(const std::string& virtual_path, const std::string& name) {
  if (name == ".") return virtual_path;
  if (name.front() == '/') return ::access(name.c_str(), F_OK) == 0 ? name : "";
  const std::size_t slash = virtual_path.find_last_of('/');
  const std::string beside = slash == std::string::npos ? name : virtual_path.substr(0, slash + 1) + name;
  if (::access(beside.c_str(), F_OK) == 0) return beside;
  return ::access(name.c_str(), F_OK) == 0 ? name : "";
}

/// The sources of virtual dataset `key` of `dataset.path` (its creation properties `create`, its
/// shape `dims`), in row order. Each mapping must take a whole source dataset to a block of whole
/// rows, and the blocks must cover every row exactly once: anything else (a slice of a source, a
/// gap, printf-style names, a missing source file, whose rows HDF5 would read as fill values) is a
/// DataError naming it.
std::vector<VirtualSource> resolve_virtual(const OpenedDataset& dataset, hid_t create, const std::string& key,
                                           const std::vector<std::int64_t>& dims) {
  std::size_t count = 0;
  STRIDER_H5_CHECK(H5Pget_virtual_count(create, &count), "counting the virtual mappings of " + key);
  std::vector<VirtualSource> sources;
  for (std::size_t i = 0; i < count; ++i) {
    H5Dataspace target(STRIDER_H5_CHECK(H5Pget_virtual_vspace(create, i), "reading a virtual mapping of " + key));
    H5Dataspace source(STRIDER_H5_CHECK(H5Pget_virtual_srcspace(create, i), "reading a virtual mapping of " + key));
    const std::string name = mapping_text(H5Pget_virtual_filename, create, i);
    const std::string source_key = mapping_text(H5Pget_virtual_dsetname, create, i);
    if (name.find('%') != std::string::npos || source_key.find('%') != std::string::npos)
      STRIDER_DATA_FAIL("virtual " + key + " names its sources printf-style (" + name + " " + source_key +
                        "); list the source files as shards instead");
    std::vector<hsize_t> start, end, source_start, source_end;
    bool whole_rows = selection_box(target.get(), start, end) && start.size() == dims.size();
    for (std::size_t d = 1; whole_rows && d < dims.size(); ++d)
      whole_rows = start[d] == 0 && end[d] + 1 == static_cast<hsize_t>(dims[d]);
    // A whole source is selected "all" (HDF5 keeps no extent for it then: validating the source
    // checks its rows), or as a block of its whole extent.
    bool whole_source = whole_rows && H5Sget_select_type(source.get()) == H5S_SEL_ALL;
    if (whole_rows && !whole_source && selection_box(source.get(), source_start, source_end)) {
      std::vector<hsize_t> source_dims(source_start.size());
      STRIDER_H5_CHECK(H5Sget_simple_extent_dims(source.get(), source_dims.data(), nullptr),
                       "reading a virtual source's shape");
      whole_source = !source_dims.empty() && source_start[0] == 0 && source_end[0] + 1 == source_dims[0] &&
                     source_dims[0] == end[0] - start[0] + 1;
    }
    if (!whole_source)
      STRIDER_DATA_FAIL("virtual " + key + " maps part of " + name + " " + source_key + " or part of a row; " +
                        "strider reads virtual datasets made of whole sources stacked along rows");
    const std::string rows = "rows " + std::to_string(start[0]) + ".." + std::to_string(end[0]);
    const std::string found = find_source(dataset.path, name);
    if (found.empty())
      STRIDER_DATA_FAIL("the source file " + name + " of virtual " + key + " " + rows +
                        " is missing (HDF5 would read its rows as fill values)");
    sources.push_back(
        {found, source_key, static_cast<std::int64_t>(start[0]), static_cast<std::int64_t>(end[0] - start[0] + 1)});
  }
  std::sort(sources.begin(), sources.end(),
            [](const VirtualSource& a, const VirtualSource& b) { return a.first_row < b.first_row; });
  std::int64_t next = 0;
  for (const VirtualSource& source : sources) {
    if (source.first_row < next)
      STRIDER_DATA_FAIL("virtual " + key + " maps two sources to row " + std::to_string(source.first_row));
    if (source.first_row > next)
      STRIDER_DATA_FAIL("virtual " + key + " rows " + std::to_string(next) + ".." +
                        std::to_string(source.first_row - 1) +
                        " map to no source (HDF5 would read them as fill values)");
    next = source.first_row + source.rows;
  }
  if (next != dims[0])
    STRIDER_DATA_FAIL("virtual " + key + " rows " + std::to_string(next) + ".." + std::to_string(dims[0] - 1) +
                      " map to no source (HDF5 would read them as fill values)");
  return sources;
}

/// The sources of `key` when it is a virtual dataset of the open file; empty otherwise.
std::vector<VirtualSource> virtual_sources(const OpenedDataset& dataset, hid_t file, const std::string& key) {
  if (!link_exists(file, key)) return {};
  H5Dataset opened(STRIDER_H5_CHECK(H5Dopen2(file, key.c_str(), H5P_DEFAULT), "opening " + key));
  H5PropertyList create(
      STRIDER_H5_CHECK(H5Dget_create_plist(opened.get()), "reading the creation properties of " + key));
  if (STRIDER_H5_CHECK(H5Pget_layout(create.get()), "reading the layout of " + key) != H5D_VIRTUAL) return {};
  H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(opened.get()), "reading the shape of " + key));
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space.get())));
  if (!dims.empty())
    STRIDER_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "reading the shape of " + key);
  if (dims.empty() || dims[0] == 0) STRIDER_DATA_FAIL("virtual " + key + " is empty");
  return resolve_virtual(dataset, create.get(), key, std::vector<std::int64_t>(dims.begin(), dims.end()));
}

/// Rank 0: a virtual dataset resolved into its sources, read as shards (each validated on its own),
/// with the labels of the virtual file (its sources' own labels are not looked at).
void validate_virtual(OpenedDataset& whole, hid_t file, const OpenedDataset& dataset,
                      const std::vector<VirtualSource>& sources, const ReaderOptions& options) {
  ReaderOptions source_options = options;
  for (const VirtualSource& source : sources) {
    const std::string what = "the source " + source.path + " " + source.dataset + " of virtual " + options.keys.data;
    check_local_file(source.path, what);
    check_hdf5_file(source.path, what);
    H5File source_file(STRIDER_H5_CHECK(H5Fopen(source.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "opening " + what));
    OpenedDataset part;
    part.path = source.path;
    ShardLayout shard;
    source_options.keys.data = source.dataset;
    source_options.require_labels = false;
    const OpenedFile opened = open_and_validate(source_file.get(), part, shard, source_options, false);
    if (part.info.variable_length || part.info.num_samples != source.rows)
      STRIDER_DATA_FAIL(what + " does not hold the " + std::to_string(source.rows) + " rows its mapping says");
    append_shard(whole, part, std::move(shard), what);
  }
  // The labels, held: read through HDF5 from the virtual file (their own sources checked first).
  const DatasetKeys& keys = options.keys;
  if (keys.labels == kNoLabelsKey || !link_exists(file, keys.labels)) {
    check_missing_labels(dataset, file, options);
    return;
  }
  virtual_sources(dataset, file, keys.labels);  // a missing source is an error, not fill values
  DatasetHandles labels = open_dataset(dataset, file, keys.labels);
  if (labels.dims.size() != 1 || labels.dims[0] != whole.info.num_samples || element_name(labels.type)[0] == 'f')
    STRIDER_DATA_FAIL("labels " + keys.labels + " must be " + std::to_string(whole.info.num_samples) +
                      " integers, one per row of virtual " + keys.data + " (it is " + format_shape(labels.dims) + " " +
                      element_name(labels.type) + ")");
  const std::vector<std::int64_t> values = read_int64(labels.dataset.get(), whole.info.num_samples, keys.labels);
  whole.labels.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < std::numeric_limits<std::int32_t>::min() || values[i] > std::numeric_limits<std::int32_t>::max())
      STRIDER_DATA_FAIL(keys.labels + "[" + std::to_string(i) + "] = " + std::to_string(values[i]) +
                        " does not fit int32");
    whole.labels[i] = static_cast<std::int32_t>(values[i]);
  }
  whole.info.has_labels = true;
}

/// Rank 0: opens every shard on its own (HDF5's default driver), validates it, reads its labels and
/// offsets, and builds the whole dataset from them. A virtual dataset becomes its sources.
void validate_dataset(OpenedDataset& whole, const std::vector<std::string>& paths, const ReaderOptions& options) {
  ReaderOptions file_options = options;
  if (paths.size() > 1 && !options.labels_in_memory) {
    file_options.labels_in_memory = true;
    log_info("holding the labels in memory: labels are read per batch from a single file only (", whole.path, " has ",
             paths.size(), " shards)");
  }
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (std::size_t index = 0; index < paths.size(); ++index) {
    const std::string what = shard_name(paths, index);
    struct stat status {};
    if (::stat(paths[index].c_str(), &status) == 0) {
      for (std::size_t earlier = 0; earlier < seen.size(); ++earlier)
        if (seen[earlier] == std::make_pair(status.st_dev, status.st_ino))
          STRIDER_THROW(DataError,
                        "cannot open " + whole.path + ": " + what + " is the same file as " + paths[earlier]);
      seen.emplace_back(status.st_dev, status.st_ino);
    }
    check_local_file(paths[index], what);
    check_hdf5_file(paths[index], what);
    H5File file(STRIDER_H5_CHECK(H5Fopen(paths[index].c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "opening " + what));
    OpenedDataset dataset;
    dataset.path = paths[index];
    const std::vector<VirtualSource> sources = virtual_sources(dataset, file.get(), options.keys.data);
    if (!sources.empty()) {
      if (paths.size() > 1)
        STRIDER_DATA_FAIL(options.keys.data + " is a virtual dataset: open it on its own, not as one of " +
                          std::to_string(paths.size()) + " files");
      validate_virtual(whole, file.get(), dataset, sources, options);
      break;
    }
    ShardLayout shard;
    const OpenedFile opened = open_and_validate(file.get(), dataset, shard, file_options);
    read_labels_and_offsets(dataset, opened, file_options);
    append_shard(whole, dataset, std::move(shard), what);
  }
  for (const ShardLayout& shard : whole.shards) whole.info.shards.push_back({shard.path, shard.first_row, shard.rows});
}

}  // namespace
}  // namespace io_detail

std::vector<std::string> reader_engines() {
  return {"auto", "hdf5", "direct", "mmap"};
}

std::unique_ptr<BatchReader> open_reader(const Communicator& comm, const std::string& path,
                                         const ReaderOptions& options) {
  using namespace io_detail;
  silence_hdf5_errors();
  std::vector<std::string> paths;
  std::string root_path = path;  // rank 0 expands its --data for every rank: they must agree on it
  comm.broadcast(root_path);
  comm.collective_try([&] {
    if (path != root_path)
      STRIDER_THROW(UsageError, "this rank was given the data '" + path + "' but rank 0 '" + root_path +
                                    "' (open_reader is collective: give every rank the same)");
    check_choice(options.engine, reader_engines(), "engine");
    if (options.copy_threads < 1 || options.copy_threads > kMaxCopyThreads)
      STRIDER_THROW(UsageError, "copy_threads must be in 1.." + std::to_string(kMaxCopyThreads) + ", got " +
                                    std::to_string(options.copy_threads));
    if (options.max_open_files < 1) STRIDER_THROW(UsageError, "max_open_files must be >= 1");
    if (options.odirect && (options.engine == "hdf5" || options.engine == "mmap"))
      STRIDER_THROW(UsageError, "--odirect reads with the direct engine; the " + options.engine +
                                    " engine reads through the page cache (use --engine direct or auto)");
    if (options.auto_raw_engine != "mmap" && options.auto_raw_engine != "direct")
      STRIDER_THROW(UsageError, "auto_raw_engine must be mmap or direct, got '" + options.auto_raw_engine + "'");
    for (const std::string* key :
         {&options.keys.data, &options.keys.labels, &options.keys.tokens, &options.keys.offsets})
      if (key->empty()) STRIDER_THROW(UsageError, "a dataset key is empty");
    if (comm.is_root()) paths = expand_data_paths(path);
  });
  broadcast_strings(comm, paths);

  OpenedDataset dataset;
  dataset.path = path;
  comm.collective_try([&] {
    if (comm.is_root()) validate_dataset(dataset, paths, options);
  });
  broadcast_dataset(comm, dataset);
  // Every rank must see every shard (a rank reads any of them); rank 0 saw them all.
  comm.collective_try([&] {
    if (comm.is_root()) return;
    std::vector<std::string> shards;
    for (const ShardLayout& shard : dataset.shards) shards.push_back(shard.path);
    for (std::size_t index = 0; index < shards.size(); ++index)
      check_local_file(shards[index], shard_name(shards, index));
  });

  std::string engine = options.engine;
  if (engine == "auto") engine = options.odirect ? "direct" : dataset.raw_readable ? options.auto_raw_engine : "hdf5";
  std::unique_ptr<BatchReader> reader = comm.collective_try([&]() -> std::unique_ptr<BatchReader> {
    if (engine != "hdf5" && !dataset.raw_readable)
      STRIDER_THROW(UsageError, "the " + engine + " engine cannot read " + path + ": " + dataset.raw_refusal +
                                    (options.odirect ? " (--odirect reads only contiguous, uncompressed data)"
                                                     : " (use --engine hdf5 or auto)"));
    if (engine == "hdf5") return make_hdf5_reader(dataset, options.max_open_files, options.copy_threads);
    if (engine == "direct")
      return make_direct_reader(dataset, options.copy_threads, options.max_open_files, options.odirect);
    return make_mmap_reader(dataset, options.copy_threads);
  });
  if (comm.is_root()) {
    const DatasetInfo& info = reader->info();
    log_info("reading ", path, " (", info.num_samples, " ", info.variable_length ? "sequences" : "samples", ", ",
             element_name(info.element_type), ", ", info.layout, info.compressed ? ", compressed" : "",
             info.shards.size() > 1 ? ", " + std::to_string(info.shards.size()) + " shards" : "", ") with the ",
             reader->engine(), " engine", options.odirect ? " and O_DIRECT" : "",
             options.engine == "auto" ? " (chosen by auto)" : "");
  }
  return reader;
}

}  // namespace strider
