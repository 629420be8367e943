# The default CUDA architectures, and the architecture of a GPU on the
# building machine that they would leave to the driver's JIT compiler.
#
# A cubin for sm_XY runs on compute capability X.Z for Z >= Y (binary
# compatibility within a major version), so 80 covers 8.0, 8.6, 8.7 and 8.9,
# 90 covers 9.0 and 100 covers 10.0 and 10.3. A GPU of a major version the
# list has no code for (12.0: RTX 50-series, RTX PRO Blackwell; 12.1: DGX
# Spark; 11.0) runs the newest PTX instead, compiled by its driver at every
# process's first start until the driver's cache holds it, with ptxas
# choices nobody checked for it. Building on such a machine, the build adds
# its architecture, where nvcc knows it.

# gpt_cuda_architectures_uncovered(OUT ARCHS NVCC_ARCHS GPU_ARCHS): of
# GPU_ARCHS (architecture numbers: "86", "120"), those no entry of ARCHS has
# a cubin for and that NVCC_ARCHS (nvcc --list-gpu-arch's "compute_NN"
# lines) holds, each once, in GPU_ARCHS' order. Below 80 nothing is added:
# the backend needs 8.0 (its start-up check names the GPU).
function(gpt_cuda_architectures_uncovered out archs nvcc_archs gpu_archs)
  set(added)
  foreach(gpu IN LISTS gpu_archs)
    if(gpu LESS 80 OR gpu IN_LIST added)
      continue()
    endif()
    math(EXPR gpu_major "${gpu} / 10")
    set(covered OFF)
    foreach(arch IN LISTS archs)
      string(REGEX REPLACE "-(real|virtual)$" "" arch "${arch}")
      if(NOT arch MATCHES "^[0-9]+$")  # 90a, native, all: not ours to reason about
        set(covered ON)
        break()
      endif()
      math(EXPR arch_major "${arch} / 10")
      if(arch_major EQUAL gpu_major AND NOT arch GREATER gpu)
        set(covered ON)
        break()
      endif()
    endforeach()
    if(NOT covered AND nvcc_archs MATCHES "compute_${gpu}([^0-9]|$)")
      list(APPEND added ${gpu})
    endif()
  endforeach()
  set(${out} ${added} PARENT_SCOPE)
endfunction()

# gpt_local_gpu_architectures(OUT): the compute capabilities of this
# machine's GPUs as architecture numbers ("90"), from nvidia-smi; empty
# where there is none, or no driver.
function(gpt_local_gpu_architectures out)
  set(archs)
  find_program(GPT_NVIDIA_SMI nvidia-smi)
  if(GPT_NVIDIA_SMI)
    execute_process(COMMAND ${GPT_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps ERROR_QUIET RESULT_VARIABLE rc TIMEOUT 30)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" arch "${cap}")
        list(APPEND archs ${arch})
      endforeach()
      if(archs)
        list(REMOVE_DUPLICATES archs)
      endif()
    endif()
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()
