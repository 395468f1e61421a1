#include "io/vlen_sequences.hpp"

#include <algorithm>

#include "io/reader_detail.hpp"

namespace strider::io_detail {

bool is_variable_length_type(hid_t type) {
  const H5T_class_t type_class = STRIDER_H5_CHECK(H5Tget_class(type), "reading a type's class");
  if (type_class == H5T_VLEN) return true;
  return type_class == H5T_STRING && STRIDER_H5_CHECK(H5Tis_variable_str(type), "reading a string type") > 0;
}

ElementType vlen_element_type(const std::string& path, hid_t type, const std::string& key, bool& native) {
  const auto refuse = [&](const std::string& what, const std::string& advice) {
    STRIDER_THROW(DataError, "cannot open " + path + ": " + key + " holds variable-length " + what +
                                 "; strider reads variable-length sequences of integers only (token ids, which " +
                                 "the bucketed sampler pads and a sequence model embeds): " + advice);
  };
  const std::string floats_advice =
      "write float sequences as " + key + " [T] + offsets [N+1] (any element type) or as fixed-size samples";
  const std::string strings_advice = "tokenize the strings into integer ids first";
  if (STRIDER_H5_CHECK(H5Tget_class(type), "reading the type of " + key) == H5T_STRING)
    refuse("strings", strings_advice);
  H5Datatype base(STRIDER_H5_CHECK(H5Tget_super(type), "reading the base type of " + key));
  const H5T_class_t base_class = STRIDER_H5_CHECK(H5Tget_class(base.get()), "reading the base type of " + key);
  const std::size_t bytes = H5Tget_size(base.get());
  if (base_class == H5T_FLOAT) refuse("sequences of " + std::to_string(bytes) + "-byte floats", floats_advice);
  if (base_class == H5T_STRING) refuse("sequences of strings", strings_advice);
  if (base_class != H5T_INTEGER || (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8))
    refuse("sequences of a " + std::to_string(bytes) + "-byte non-integer type",
           "write 1, 2, 4 or 8-byte integers (h5py.vlen_dtype(np.int32))");
  const bool is_signed = STRIDER_H5_CHECK(H5Tget_sign(base.get()), "reading the sign of " + key) == H5T_SGN_2;
  const ElementType types[2][4] = {{ElementType::uint8, ElementType::uint16, ElementType::uint32, ElementType::uint64},
                                   {ElementType::int8, ElementType::int16, ElementType::int32, ElementType::int64}};
  const ElementType element = types[is_signed][bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : 3];
  native = STRIDER_H5_CHECK(H5Tequal(base.get(), native_hdf5_type(element)), "comparing types") > 0;
  return element;
}

VlenDescriptors::VlenDescriptors(ElementType type)
    : memory_type_(STRIDER_H5_CHECK(H5Tvlen_create(native_hdf5_type(type)), "creating a vlen memory type")) {}

VlenDescriptors::~VlenDescriptors() {
  reclaim();
}

void VlenDescriptors::reclaim() noexcept {
  if (descriptors_.empty()) return;
  // HDF5 allocated every descriptor's values; H5Dvlen_reclaim frees them (and zeroes the descriptors).
  if (H5Dvlen_reclaim(memory_type_.get(), memory_space_.get(), H5P_DEFAULT, descriptors_.data()) < 0)
    H5Eclear2(H5E_DEFAULT);
  descriptors_.clear();
  memory_space_.reset();
}

void VlenDescriptors::read(hid_t dataset, hid_t file_space, std::int64_t rows, const std::string& what) {
  reclaim();
  const hsize_t count = static_cast<hsize_t>(rows);
  memory_space_.reset(STRIDER_H5_CHECK(H5Screate_simple(1, &count, nullptr), "creating a memory space"));
  descriptors_.assign(static_cast<std::size_t>(rows), hvl_t{0, nullptr});
  try {
    STRIDER_H5_CHECK(
        H5Dread(dataset, memory_type_.get(), memory_space_.get(), file_space, H5P_DEFAULT, descriptors_.data()),
        "reading " + what);
  } catch (...) {
    reclaim();  // HDF5 may have filled some descriptors before it failed (the rest are still null)
    throw;
  }
}

std::vector<std::int64_t> read_vlen_lengths(hid_t dataset, ElementType type, std::int64_t rows,
                                            const std::string& what) {
  constexpr std::int64_t kBlockRows = 65536;  // bounds HDF5's memory for the values to one block's
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(rows));
  H5Dataspace space(STRIDER_H5_CHECK(H5Dget_space(dataset), "reading the shape of " + what));
  VlenDescriptors descriptors(type);
  for (std::int64_t first = 0; first < rows; first += kBlockRows) {
    const hsize_t start = static_cast<hsize_t>(first);
    const hsize_t count = static_cast<hsize_t>(std::min(kBlockRows, rows - first));
    STRIDER_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr),
                     "selecting rows of " + what);
    descriptors.read(dataset, space.get(), static_cast<std::int64_t>(count), "the sequence lengths of " + what);
    for (std::int64_t row = 0; row < descriptors.rows(); ++row)
      lengths[static_cast<std::size_t>(first + row)] = descriptors.length(row);
  }
  return lengths;
}

}  // namespace strider::io_detail
