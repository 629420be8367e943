#!/usr/bin/env bash
# mpirun with the settings this project's scripts and tests need on a single
# machine: running as root is allowed (containers, CI), more ranks than cores
# is allowed (--oversubscribe), and shared-memory transfers avoid CMA, which
# containers commonly forbid. Usage: scripts/mpirun.sh -np N PROGRAM ARGS...
set -euo pipefail
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
exec mpirun --bind-to none "$@"
