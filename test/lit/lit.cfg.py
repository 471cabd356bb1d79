# lit configuration of lazyjit's golden tests: lazyjit-dump output checked with FileCheck.
import os

import lit.formats

config.name = "lazyjit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".ljir", ".test"]
config.excludes = ["Inputs", "programs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.lazyjit_binary_dir, "test", "lit")

# lazyjit-dump and the test programs first, then LLVM's FileCheck and not.
path = os.pathsep.join([config.lazyjit_tools_dir, config.lazyjit_programs_dir, config.lazyjit_examples_dir,
                        config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
for name in ("LAZYJIT_LOG_LEVEL", "LAZYJIT_DUMP_DIR", "LAZYJIT_CACHE_SIZE", "LAZYJIT_CACHE_DIR", "LAZYJIT_MAX_GRAPHS"):
    os.environ.pop(name, None)
# The golden tests check compiled code, its dumps and its logs: no tier 0 unless a RUN line
# asks for it (LAZYJIT_TIER=0).
config.environment["LAZYJIT_TIER"] = "1"

if os.path.exists(os.path.join(config.lazyjit_examples_dir, "batchnorm_gelu")):
    config.available_features.add("examples")

with open("/proc/cpuinfo") as cpuinfo:
    if " avx512f" in cpuinfo.read():
        config.available_features.add("avx512")
