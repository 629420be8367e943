# Open MPI, parallel HDF5 and PCRE2 from GPT_CARRY_PREFIX: a Debian /usr tree
# unpacked with dpkg -x by scripts/device_carry.sh, wherever it lies. The
# tree's compiler wrappers, h5pcc and pkg-config files name /usr, so the
# targets point at its files directly instead of going through them.
set(_usr "${GPT_CARRY_PREFIX}")
set(_lib "${_usr}/lib/x86_64-linux-gnu")

# An imported shared library TARGET at LOCATION with headers in INCLUDE;
# extra arguments are more target properties.
function(gpt_prefix_lib target location include)
  if(NOT EXISTS "${location}" OR NOT EXISTS "${include}")
    message(FATAL_ERROR "GPT_CARRY_PREFIX=${_usr}: ${location} or ${include} missing (run scripts/device_carry.sh)")
  endif()
  add_library(${target} SHARED IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${location}" INTERFACE_INCLUDE_DIRECTORIES
                                             "${include}" ${ARGN})
endfunction()

# The C API only: OMPI_SKIP_MPICXX keeps mpi.h from declaring the C++
# bindings (libmpi_cxx).
gpt_prefix_lib(MPI::MPI_C "${_lib}/libmpi.so.40" "${_lib}/openmpi/include" INTERFACE_COMPILE_DEFINITIONS
               OMPI_SKIP_MPICXX=1)
add_library(MPI::MPI_CXX ALIAS MPI::MPI_C)  # the same library: the C API serves both
gpt_prefix_lib(HDF5::HDF5 "${_lib}/libhdf5_openmpi.so.103" "${_usr}/include/hdf5/openmpi" INTERFACE_LINK_LIBRARIES
               MPI::MPI_C)
gpt_prefix_lib(PkgConfig::PCRE2 "${_lib}/libpcre2-8.so.0" "${_usr}/include")
# The linker finds what those libraries need (libsz, libcurl, libhwloc, ...)
# in the same tree; at run time LD_LIBRARY_PATH must name it (gpu_verify.sh).
add_link_options("LINKER:-rpath-link,${_lib}:${_lib}/openmpi/lib")
message(STATUS "gpt: Open MPI, HDF5 and PCRE2 from ${_usr}")
