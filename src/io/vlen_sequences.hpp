#pragma once
// h5py variable-length sequences (h5py.vlen_dtype(np.int32) and friends): a one-dimensional dataset
// [N] whose element i is a sequence of integers of its own length. HDF5 reads them as descriptors
// (hvl_t: length + pointer into memory HDF5 allocated), which must be freed with H5Dvlen_reclaim (Debian 12's
// HDF5 1.10.8 declares H5Treclaim, its successor, but does not export it). Only the hdf5 engine reads them (the bytes
// live in HDF5's global heap, not at one file offset); strider-convert rewrites them as tokens + offsets.

#include <cstdint>
#include <string>
#include <vector>

#include "strider/core/element_type.hpp"
#include "strider/io/hdf5_handle.hpp"

namespace strider::io_detail {

/// True when a stored type is variable-length: a vlen sequence (H5T_VLEN) or a variable-length string.
bool is_variable_length_type(hid_t type);

/// The element type of the sequences of vlen dataset `key`, whose stored type is `type`: an integer
/// of 1, 2, 4 or 8 bytes. Anything else (floats, strings, nested types) throws DataError "cannot open
/// PATH: ..." with one line saying what is read and why. Sets `native` when the stored base type is
/// the native one.
ElementType vlen_element_type(const std::string& path, hid_t type, const std::string& key, bool& native);

/// Descriptors of `rows` sequences read by H5Dread, freed (H5Dvlen_reclaim) when this goes away or the
/// next read() starts, so that no exception between the read and the copy leaks HDF5's buffers.
class VlenDescriptors {
 public:
  explicit VlenDescriptors(ElementType type);
  ~VlenDescriptors();
  VlenDescriptors(const VlenDescriptors&) = delete;
  VlenDescriptors& operator=(const VlenDescriptors&) = delete;
  /// Reads the sequences `file_space` selects (`rows` of them, in selection order) of `dataset`.
  /// `what` names them for an error.
  void read(hid_t dataset, hid_t file_space, std::int64_t rows, const std::string& what);
  std::int64_t rows() const noexcept { return static_cast<std::int64_t>(descriptors_.size()); }
  std::int64_t length(std::int64_t row) const noexcept {
    return static_cast<std::int64_t>(descriptors_[static_cast<std::size_t>(row)].len);
  }
  const void* values(std::int64_t row) const noexcept { return descriptors_[static_cast<std::size_t>(row)].p; }
  /// Frees what the last read() allocated.
  void reclaim() noexcept;

 private:
  H5Datatype memory_type_;  // vlen of the native element type
  H5Dataspace memory_space_;
  std::vector<hvl_t> descriptors_;
};

/// Every sequence's length of vlen dataset `dataset` ([rows]), read once (blocks of rows at a time,
/// each block's memory freed before the next). HDF5 reads the values with the descriptors: this costs
/// one pass over the data.
std::vector<std::int64_t> read_vlen_lengths(hid_t dataset, ElementType type, std::int64_t rows,
                                            const std::string& what);

}  // namespace strider::io_detail
