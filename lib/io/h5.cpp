#include "io/h5.hpp"

#include <exception>
#include <mutex>
#include <utility>

namespace gpt::h5 {
namespace {

// HDF5 prints its error stack by default; we turn it into exceptions instead.
void quiet() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

// The error stack's first (the API call's) and last (where it began, e.g.
// the file driver's "file write failed") descriptions.
struct Ends {
  std::string first, last;
};
herr_t ends(unsigned n, const H5E_error2_t* e, void* out) {
  auto& d = *static_cast<Ends*>(out);
  (n == 0 ? d.first : d.last) = e->desc ? e->desc : "";
  return 0;
}

[[noreturn]] void fail(const std::string& what) {
  Ends d;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, ends, &d);
  H5Eclear2(H5E_DEFAULT);
  std::string detail = d.first;
  if (!d.last.empty() && d.last != d.first) detail += detail.empty() ? d.last : " (" + d.last + ")";
  throw H5Error(detail.empty() ? what : fmt::format("{}: {}", what, detail));
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) fail(what);
  return id;
}

void check_status(herr_t s, const std::string& what) {
  if (s < 0) fail(what);
}

herr_t close_any(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE: return H5Fclose(id);
    case H5I_DATASET: return H5Dclose(id);
    case H5I_DATASPACE: return H5Sclose(id);
    case H5I_ATTR: return H5Aclose(id);
    case H5I_GROUP: return H5Gclose(id);
    case H5I_GENPROP_LST: return H5Pclose(id);
    case H5I_DATATYPE: return H5Tclose(id);
    default: return -1;
  }
}

Id file_access(MPI_Comm comm) {
  Id fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"));
  if (comm != MPI_COMM_NULL) check_status(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
  return fapl;
}

// Selects elements [lo, hi) of a row-major dataset of `shape` as at most
// three hyperslabs (partial first row, whole rows, partial last row).
void select_range(hid_t space, const std::vector<int64_t>& shape, int64_t lo, int64_t hi) {
  if (lo >= hi) {
    check_status(H5Sselect_none(space), "H5Sselect_none");
    return;
  }
  const int64_t cols = shape.size() == 2 ? shape[1] : 1;
  auto add = [&](int64_t r, int64_t c, int64_t nr, int64_t nc, H5S_seloper_t op) {
    if (shape.size() == 1) {
      hsize_t start = hsize_t(r * cols + c), count = hsize_t(nc);
      check_status(H5Sselect_hyperslab(space, op, &start, nullptr, &count, nullptr), "H5Sselect_hyperslab");
    } else {
      hsize_t start[2] = {hsize_t(r), hsize_t(c)}, count[2] = {hsize_t(nr), hsize_t(nc)};
      check_status(H5Sselect_hyperslab(space, op, start, nullptr, count, nullptr), "H5Sselect_hyperslab");
    }
  };
  if (shape.size() == 1) {
    add(0, lo, 1, hi - lo, H5S_SELECT_SET);
    return;
  }
  const int64_t r0 = lo / cols, c0 = lo % cols, r1 = (hi - 1) / cols, c1 = (hi - 1) % cols;
  if (r0 == r1) {
    add(r0, c0, 1, c1 - c0 + 1, H5S_SELECT_SET);
    return;
  }
  add(r0, c0, 1, cols - c0, H5S_SELECT_SET);
  if (r1 - r0 > 1) add(r0 + 1, 0, r1 - r0 - 1, cols, H5S_SELECT_OR);
  add(r1, 0, 1, c1 + 1, H5S_SELECT_OR);
}

void transfer(hid_t dset, float* data, int64_t lo, int64_t hi, bool collective, bool write, CollectiveIo* io) {
  const std::vector<int64_t> shape = shape_of(dset);
  Id fspace(check(H5Dget_space(dset), "H5Dget_space"));
  select_range(fspace.get(), shape, lo, hi);
  hsize_t n = hsize_t(std::max<int64_t>(hi - lo, 0));
  hsize_t one = 1;
  Id mspace(check(H5Screate_simple(1, n ? &n : &one, nullptr), "H5Screate_simple"));
  if (n == 0) check_status(H5Sselect_none(mspace.get()), "H5Sselect_none");
  Id dxpl(check(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate"));
  if (collective) check_status(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
  if (write) {
    check_status(H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(), data), "H5Dwrite");
  } else {
    check_status(H5Dread(dset, H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(), data), "H5Dread");
  }
  if (io) io->bytes += int64_t(n * sizeof(float));
  if (collective && io) io->record(dxpl.get(), dset);
}

std::string name_of(hid_t obj) {
  const ssize_t n = H5Iget_name(obj, nullptr, 0);
  if (n <= 0) return "?";
  std::string name(size_t(n) + 1, '\0');
  H5Iget_name(obj, name.data(), name.size());
  name.resize(size_t(n));
  return name;
}

}  // namespace

std::string in_file(const std::string& file, const std::string& message) {
  return message.rfind(file, 0) == 0 ? message : fmt::format("{}: {}", file, message);
}

Id& Id::operator=(Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

namespace {
// std::uncaught_exceptions() when this thread's innermost AbandonOnError
// was made, -1 while there is none.
thread_local int abandon_base = -1;
}  // namespace

AbandonOnError::AbandonOnError() : outer_(abandon_base) { abandon_base = std::uncaught_exceptions(); }
AbandonOnError::~AbandonOnError() { abandon_base = outer_; }

void Id::reset() {
  const bool abandon = abandon_base >= 0 && std::uncaught_exceptions() > abandon_base;
  if (id_ >= 0 && !abandon) close_any(id_);
  id_ = H5I_INVALID_HID;
}

void Id::close() {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  check_status(close_any(id), "close");
}

Id create_file(const std::string& path, MPI_Comm comm) {
  quiet();
  Id fapl = file_access(comm);
  return Id(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), path + ": cannot create"));
}

Id open_file(const std::string& path, MPI_Comm comm) {
  quiet();
  Id fapl = file_access(comm);
  return Id(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), path + ": cannot open as HDF5"));
}

bool is_hdf5(const std::string& path) {
  quiet();
  return H5Fis_hdf5(path.c_str()) > 0;  // H5Fis_accessible is 1.12+; Debian 12 has 1.10
}

Id create_dataset(hid_t file, const std::string& name, const std::vector<int64_t>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Id space(check(H5Screate_simple(int(dims.size()), dims.data(), nullptr), "H5Screate_simple"));
  Id lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"));
  check_status(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  return Id(check(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                  "cannot create dataset " + name));
}

Id open_dataset(hid_t file, const std::string& name) {
  return Id(check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "missing dataset " + name));
}

std::vector<int64_t> shape_of(hid_t dset) {
  Id space(check(H5Dget_space(dset), "H5Dget_space"));
  const int nd = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(size_t(std::max(nd, 0)));
  check_status(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims");
  return {dims.begin(), dims.end()};
}

void write_range(hid_t dset, const float* data, int64_t lo, int64_t hi, bool collective, CollectiveIo* io) {
  transfer(dset, const_cast<float*>(data), lo, hi, collective, true, io);
}

void read_range(hid_t dset, float* data, int64_t lo, int64_t hi, bool collective, CollectiveIo* io) {
  transfer(dset, data, lo, hi, collective, false, io);
}

void CollectiveIo::record(hid_t dxpl, hid_t dset) {
  H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
  uint32_t local = 0, global = 0;
  check_status(H5Pget_mpio_actual_io_mode(dxpl, &mode), "H5Pget_mpio_actual_io_mode");
  check_status(H5Pget_mpio_no_collective_cause(dxpl, &local, &global), "H5Pget_mpio_no_collective_cause");
  // A rank with an empty selection still takes part in the collective call
  // (mode H5D_MPIO_CONTIGUOUS_COLLECTIVE, or a chunked one's); only
  // H5D_MPIO_NO_COLLECTIVE, with its cause, is the fallback.
  if (mode != H5D_MPIO_NO_COLLECTIVE) {
    ++collective;
    return;
  }
  ++independent;
  causes |= global | local;
  if (first.empty()) first = name_of(dset);
}

std::string CollectiveIo::why() const {
  static constexpr std::pair<uint32_t, const char*> kCauses[] = {
      {H5D_MPIO_SET_INDEPENDENT, "independent I/O was asked for"},
      {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion"},
      {H5D_MPIO_DATA_TRANSFORMS, "data transforms"},
      {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "HDF5_MPI_OPT_TYPES disables MPI derived types"},
      {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "a dataspace neither simple nor scalar"},
      {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "a dataset neither contiguous nor chunked"},
      {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "filtered writes (parallel ones disabled)"},
      {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "an error while HDF5 checked whether it could"}};
  std::string out;
  uint32_t known = 0;
  for (const auto& [bit, words] : kCauses) {
    known |= bit;
    if (causes & bit) out += (out.empty() ? "" : ", ") + std::string(words);
  }
  if (causes & ~known) out += (out.empty() ? "" : ", ") + fmt::format("HDF5 cause bits {:#x}", causes & ~known);
  return out.empty() ? "no cause given" : out;
}

namespace {
void set_attr_raw(hid_t obj, const std::string& name, hid_t type, const void* value) {
  if (H5Aexists(obj, name.c_str()) > 0) check_status(H5Adelete(obj, name.c_str()), "H5Adelete " + name);
  Id space(check(H5Screate(H5S_SCALAR), "H5Screate"));
  Id a(check(H5Acreate2(obj, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate " + name));
  check_status(H5Awrite(a.get(), type, value), "H5Awrite " + name);
}
}  // namespace

void set_attr(hid_t obj, const std::string& name, const std::string& value) {
  Id type(check(H5Tcopy(H5T_C_S1), "H5Tcopy"));
  check_status(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), "H5Tset_size");
  set_attr_raw(obj, name, type.get(), value.empty() ? "" : value.data());
}
void set_attr(hid_t obj, const std::string& name, int64_t value) { set_attr_raw(obj, name, H5T_NATIVE_INT64, &value); }
void set_attr(hid_t obj, const std::string& name, uint64_t value) { set_attr_raw(obj, name, H5T_NATIVE_UINT64, &value); }

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

std::string attr_string(hid_t obj, const std::string& name) {
  Id a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "missing attribute " + name));
  Id type(check(H5Aget_type(a.get()), "H5Aget_type"));
  const size_t n = H5Tget_size(type.get());
  std::string s(n, '\0');
  Id mem(check(H5Tcopy(H5T_C_S1), "H5Tcopy"));
  check_status(H5Tset_size(mem.get(), n), "H5Tset_size");
  check_status(H5Aread(a.get(), mem.get(), s.data()), "H5Aread " + name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

int64_t attr_int(hid_t obj, const std::string& name) {
  Id a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "missing attribute " + name));
  int64_t v = 0;
  check_status(H5Aread(a.get(), H5T_NATIVE_INT64, &v), "H5Aread " + name);
  return v;
}

uint64_t attr_uint(hid_t obj, const std::string& name) {
  Id a(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "missing attribute " + name));
  uint64_t v = 0;
  check_status(H5Aread(a.get(), H5T_NATIVE_UINT64, &v), "H5Aread " + name);
  return v;
}

}  // namespace gpt::h5
