#!/usr/bin/env python3
"""Runs one of bench/torch_gpu_*.py on the CPU, for tests/gpu/bench_smoke.sh
on a machine without a GPU: CUDA events become host timers, the device name
is "cpu" and torch.rand makes CPU tensors. Enough for torch_gpu_gemm.py (so
the smoke test joins real PyTorch rows to ours); the other two scripts need
more of CUDA than this gives and fail, as they would without PyTorch.

  torch_cpu_shim.py SCRIPT [ARGS...]
"""
import runpy
import sys
import time

import torch


class HostEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


torch.cuda.Event = HostEvent
torch.cuda.get_device_name = lambda i=0: "cpu"
_rand = torch.rand
torch.rand = lambda *shape, **kw: _rand(*shape, **{**kw, "device": "cpu"})
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
