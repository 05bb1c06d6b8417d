#!/usr/bin/env bash
# The DP-SGD checks on a CUDA machine: the nets' tests with every net on the GPU, then
# benchmarks/dpsgd_speed.py on the GPU beside plain torch, plain skorch and Opacus (same card,
# same run). Written for a lent machine whose Python has torch with CUDA but no skorch, Opacus,
# dp-accounting or autodp, and no network: those travel as wheels in .whl/ (made on a machine
# with PyPI, for that machine's Python, e.g. 3.12):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl skorch==1.4.0 opacus==1.6.0 dp-accounting==0.6.0 dm-tree==0.1.10
#   python3 -m pip wheel --no-deps -w .whl autodp==0.2.3.1
#
# Then, on the GPU machine, from the repository root: bash benchmarks/cuda_check.sh OUTDIR
# OUTDIR receives cuda_tests.log, dpsgd_speed_cuda.txt and the throughput plot.
set -u
OUT_DIR=${1:-benchmarks/results}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
# skdp's dependencies from .whl/ (benchmarks/remote_wheels.sh).
source benchmarks/remote_wheels.sh
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import sys, torch, numpy, scipy, sklearn, skorch, opacus, dp_accounting, skdp
print('python', sys.version.split()[0], '| torch', torch.__version__, 'cuda', torch.version.cuda,
      '| numpy', numpy.__version__, '| scipy', scipy.__version__, '| scikit-learn', sklearn.__version__,
      '| skorch', skorch.__version__, '| opacus', opacus.__version__, '| skdp', skdp.__file__)"
} 2>&1 | tee "$OUT_DIR/cuda_env.txt"

# 1. The nets' tests, every net on the GPU (tests/conftest.py); tests/nn/test_cuda.py checks the
#    noise scale, the clipping bound, ghost = vmap norms and CPU-equal accounting on the device.
SKDP_TEST_DEVICE=cuda timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest tests/nn -m "not slow" \
    -n "${TEST_WORKERS:-8}" -q -rfE -p no:cacheprovider 2>&1 | tee "$OUT_DIR/cuda_tests.log"

# 2. Throughput and device memory on the GPU (100 steps of batch 256 per epoch).
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/dpsgd_speed.py --quick --device cuda \
    --rows "${ROWS:-25600}" 2>&1 | tee "$OUT_DIR/dpsgd_speed_cuda.txt"
cp benchmarks/results/dpsgd_speed_cuda.png "$OUT_DIR/" 2>/dev/null || true
