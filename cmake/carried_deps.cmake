# Header-only dependencies and GoogleTest: the installed packages when they
# are there, otherwise copies under GPT_CARRY_DIR/include and GoogleTest
# built from GPT_CARRY_DIR/googletest (scripts/device_carry.sh assembles both
# from this machine's Debian packages for a GPU machine that lacks them).
# The full build needs all of them; GPT_GPU_OPS_ONLY only Eigen, fmt and
# spdlog (CLI11 and nlohmann-json build its benchmarks when present).
set(_carry_inc "${GPT_CARRY_DIR}/include")

# TARGET: an interface target over ${_carry_inc}/SUBDIR when find_package
# did not define it; HEADER proves the copy is there; REQUIRED fails
# without it. Extra arguments are compile definitions.
function(gpt_carried target subdir header required)
  if(TARGET ${target})
    return()
  endif()
  if(NOT EXISTS "${_carry_inc}/${subdir}/${header}")
    if(required)
      message(FATAL_ERROR "${target} not found: install its Debian package or run scripts/device_carry.sh")
    endif()
    return()
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} INTERFACE "${_carry_inc}/${subdir}")
  if(ARGN)
    target_compile_definitions(${target} INTERFACE ${ARGN})
  endif()
endfunction()

find_package(Eigen3 3.4 QUIET NO_MODULE)
gpt_carried(Eigen3::Eigen eigen3 Eigen/Dense ON)
find_package(fmt QUIET)
gpt_carried(fmt::fmt "" fmt/format.h ON FMT_HEADER_ONLY)
find_package(spdlog QUIET)
if(NOT spdlog_FOUND)
  gpt_carried(spdlog::spdlog "" spdlog/spdlog.h ON SPDLOG_FMT_EXTERNAL)
  set_property(TARGET spdlog::spdlog APPEND PROPERTY INTERFACE_LINK_LIBRARIES fmt::fmt)
endif()
if(GPT_GPU_OPS_ONLY)
  set(_full OFF)
else()
  set(_full ON)
endif()
find_package(CLI11 QUIET)
gpt_carried(CLI11::CLI11 "" CLI/CLI.hpp ${_full})
find_package(nlohmann_json 3.10 QUIET)
gpt_carried(nlohmann_json::nlohmann_json "" nlohmann/json.hpp ${_full})
find_package(tomlplusplus QUIET)
gpt_carried(tomlplusplus::tomlplusplus "" toml++/toml.h ${_full})

if(GPT_TESTS)
  find_package(GTest QUIET)
  if(NOT TARGET GTest::gtest_main)
    if(NOT EXISTS "${GPT_CARRY_DIR}/googletest/CMakeLists.txt")
      message(FATAL_ERROR "GoogleTest not found: install libgtest-dev or run scripts/device_carry.sh")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory("${GPT_CARRY_DIR}/googletest" "${CMAKE_BINARY_DIR}/_googletest" EXCLUDE_FROM_ALL)
    if(NOT TARGET GTest::gtest_main)  # GoogleTest >= 1.11 defines the aliases itself
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
  endif()
endif()
