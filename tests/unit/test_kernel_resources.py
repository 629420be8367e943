#!/usr/bin/env python3
"""The rules of scripts/kernel_resources.py on made-up kernels (ctest
kernel_resources.rules): a stand-in ptxas prints the resource lines each
case needs, so every rule is shown to fail when broken and to pass at its
limit, independently of the backend's real kernels (which
emulated.launch_resources checks). Occupancy figures are the CUDA occupancy
calculator's for compute capability 9.0.

  test_kernel_resources.py SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = None

FAKE_PTXAS = """#!/usr/bin/env python3
import sys
ptx = next(a for a in sys.argv[1:] if a.endswith(".ptx"))
with open(ptx[:-4] + ".calls", "a") as calls:
    calls.write(next(a for a in sys.argv[1:] if a.startswith("--gpu-name=")) + "\\n")
sys.stderr.write(open(ptx[:-4] + ".usage").read())
"""


def usage(name, regs, smem=0, spill=0):
    return (f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
            f"ptxas info    : Function properties for {name}\n"
            f"    0 bytes stack frame, {spill} bytes spill stores, {spill} bytes spill loads\n"
            f"ptxas info    : Used {regs} registers, used 1 barriers, {smem} bytes smem\n")


def entry(name, maxntid=None):
    bound = f".maxntid {maxntid}, 1, 1\n" if maxntid else ""
    return f".visible .entry {name}(\n\t.param .u64 p0\n)\n{bound}{{\n\tret;\n}}\n"


class Rules(unittest.TestCase):
    def run_check(self, kernels, launches, extra=(), archs=("sm_90",)):
        """kernels: (name, regs, static smem, spill, maxntid); launches:
        (name, threads, dynamic smem, opt-in); archs: each given the one PTX
        file. Returns (exit status, output, report); self.ptxas_calls: the
        --gpu-name of each ptxas run."""
        with tempfile.TemporaryDirectory() as d:
            ptxas = os.path.join(d, "ptxas")
            with open(ptxas, "w") as f:
                f.write(FAKE_PTXAS)
            os.chmod(ptxas, 0o755)
            ptx = os.path.join(d, "k.ptx")
            with open(ptx, "w") as f:
                f.write("".join(entry(k[0], k[4]) for k in kernels))
            with open(os.path.join(d, "k.usage"), "w") as f:
                f.write("".join(usage(k[0], k[1], k[2], k[3]) for k in kernels))
            logs = os.path.join(d, "logs")
            os.mkdir(logs)
            if launches:
                with open(os.path.join(logs, "launches.1.txt"), "w") as f:
                    f.write("".join(f"{n} {t} {s} {o} 3\n" for n, t, s, o in launches))
            out = os.path.join(d, "report.json")
            r = subprocess.run([sys.executable, SCRIPT, "--ptxas", ptxas, "--logs", logs, "--json", out, *extra,
                                *(f"{arch}={ptx}" for arch in archs)], capture_output=True, text=True)
            calls = os.path.join(d, "k.calls")
            self.ptxas_calls = open(calls).read().split() if os.path.exists(calls) else []
            report = None
            if os.path.exists(out):
                with open(out) as f:
                    report = json.load(f)
            return r.returncode, r.stdout + r.stderr, report

    def assert_violation(self, kernels, launches, text, extra=(), archs=("sm_90",)):
        rc, out, _ = self.run_check(kernels, launches, extra, archs)
        self.assertEqual(rc, 1, out)
        self.assertIn(text, out)

    def assert_clean(self, kernels, launches, extra=(), archs=("sm_90",)):
        rc, out, report = self.run_check(kernels, launches, extra, archs)
        self.assertEqual(rc, 0, out)
        return report

    def test_occupancy_of_a_clean_launch(self):
        # 64 registers: 2048 a warp, 8 warps a quarter, 32 an SM: 8 blocks of 4 warps, 50%.
        report = self.assert_clean([("_Z1av", 64, 0, 0, 128)], [("_Z1av", 128, 0, 0)])
        row = report["archs"]["sm_90"]["launched"][0]
        self.assertEqual((row["kernel"], row["blocks_per_sm"], row["occupancy"], row["limited_by"]),
                         ("a", 8, 0.5, "registers"))

    def test_threads_above_launch_bounds(self):
        self.assert_violation([("_Z1av", 64, 0, 0, 128)], [("_Z1av", 256, 0, 0)], "above its __launch_bounds__ 128")

    def test_register_file(self):
        # 255 registers round to 256 a thread: 8 warps fit, 9 do not.
        self.assert_clean([("_Z1bv", 255, 0, 0, None)], [("_Z1bv", 256, 0, 0)])
        self.assert_violation([("_Z1bv", 255, 0, 0, None)], [("_Z1bv", 288, 0, 0)], "too many resources requested")

    def test_dynamic_shared_memory_needs_the_opt_in_above_48_kib_less_static(self):
        k = [("_Z1cv", 32, 16384, 0, None)]
        self.assert_clean(k, [("_Z1cv", 128, 32768, 0)])
        self.assert_violation(k, [("_Z1cv", 128, 32769, 0)], "above the 32768 it may have")
        self.assert_clean(k, [("_Z1cv", 128, 100000, 100000)])
        self.assert_violation(k, [("_Z1cv", 128, 100001, 100000)], "above the 100000 it may have")

    def test_opt_in_plus_static_within_a_blocks_maximum(self):
        k = [("_Z1cv", 32, 16384, 0, None)]
        self.assert_clean(k, [("_Z1cv", 128, 1000, 227 * 1024 - 16384)])
        self.assert_violation(k, [("_Z1cv", 128, 1000, 227 * 1024 - 16383)], "above a block's 232448")

    def test_smem_gated_kernels_are_not_run_where_a_block_cannot_have_their_memory(self):
        # 8.9: 99 KiB a block (101376 bytes), 100 KiB an SM, 1536 threads.
        k = [("_Z1fv", 128, 0, 0, 128)]
        big = [("_Z1fv", 128, 105488, 105488)]
        self.assert_clean(k, big)
        self.assert_violation(k, big, "above a block's 101376", archs=("sm_89",))
        report = self.assert_clean(k, big, ["--smem-gated", "^f$"], archs=("sm_89",))
        row = report["archs"]["sm_89"]["launched"][0]
        self.assertEqual((row["runs"], row["blocks_per_sm"], row["limited_by"]), (False, 0, "not run: shared memory"))
        # At the limit it runs: one block (101376 + 1024 reserved = 100 KiB), 4 warps of 48.
        report = self.assert_clean(k, [("_Z1fv", 128, 101376, 101376)], ["--smem-gated", "^f$"], archs=("sm_89",))
        row = report["archs"]["sm_89"]["launched"][0]
        self.assertEqual((row["runs"], row["blocks_per_sm"], row["occupancy"], row["limited_by"]),
                         (True, 1, 0.083, "shared memory"))

    def test_8_6_and_8_9_run_the_sm_80_code(self):
        # One ptxas run for sm_80, whose counts the smaller SMs take (threads: 1536 / 256 = 6 blocks).
        report = self.assert_clean([("_Z1av", 32, 0, 0, None)], [("_Z1av", 256, 0, 0)],
                                   archs=("sm_80", "sm_86", "sm_89"))
        self.assertEqual(self.ptxas_calls, ["--gpu-name=sm_80"])
        self.assertEqual([report["archs"][a]["launched"][0]["blocks_per_sm"] for a in ("sm_80", "sm_86", "sm_89")],
                         [8, 6, 6])

    def test_12_0_assembles_the_sm_100_ptx_for_itself(self):
        # The same PTX file given to sm_100 and sm_120_jit is assembled once for
        # each (the driver compiles sm_100's PTX for a 12.0 GPU); 12.0's SM holds
        # 1536 threads and 24 blocks: 64-thread blocks, 24 (not 32 as on sm_100).
        report = self.assert_clean([("_Z1av", 32, 0, 0, None)], [("_Z1av", 64, 0, 0)],
                                   archs=("sm_100", "sm_120_jit"))
        self.assertEqual(sorted(self.ptxas_calls), ["--gpu-name=sm_100", "--gpu-name=sm_120"])
        self.assertEqual([report["archs"][a]["launched"][0]["blocks_per_sm"] for a in ("sm_100", "sm_120_jit")],
                         [32, 24])
        for arch in ("sm_120", "sm_120_jit"):
            self.assert_violation([("_Z1fv", 32, 0, 0, None)], [("_Z1fv", 128, 101377, 101377)],
                                  "above a block's 101376", archs=(arch,))

    def test_every_compiled_kernel_is_launched(self):
        k = [("_Z1av", 32, 0, 0, None), ("_Z1dv", 32, 0, 0, None)]
        self.assert_violation(k, [("_Z1av", 128, 0, 0)], "d: compiled but launched by no test")
        self.assert_clean(k, [("_Z1av", 128, 0, 0)], ["--unlaunched", "^d$"])

    def test_spills(self):
        k = [("_Z1ev", 255, 0, 24, None)]
        self.assert_violation(k, [("_Z1ev", 32, 0, 0)], "e: spills 24 bytes")
        self.assert_clean(k, [("_Z1ev", 32, 0, 0)], ["--spill-ok", "^e$"])

    def test_a_launch_of_a_kernel_not_in_the_ptx(self):
        k = [("_Z1av", 32, 0, 0, None)]
        self.assert_violation(k, [("_Z1av", 128, 0, 0), ("unnamed@0x1234", 128, 0, 0)],
                              "launched, but no kernel of that name in the PTX")

    def test_no_launches_logged(self):
        rc, out, _ = self.run_check([("_Z1av", 32, 0, 0, None)], [])
        self.assertNotEqual(rc, 0)
        self.assertIn("no launches logged", out)


if __name__ == "__main__":
    SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=2)
