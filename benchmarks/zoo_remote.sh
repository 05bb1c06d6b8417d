#!/usr/bin/env bash
# The zoo on a lent many-core machine (the device tool's GPU machines have 16 cores; the zoo's
# fits run on the CPU): every fit, peer run and ceiling of the named families as a task of a
# process pool (benchmarks/zoo.py --jobs), with diffprivlib as the peer.  Written for a machine
# whose Python (e.g. 3.12) has numpy, scipy, scikit-learn and torch but no network: skdp's
# other dependencies travel as wheels in .whl/ (see benchmarks/cuda_check.sh for the command
# that makes them) and the peer's in .whl_peer/, made on a machine with PyPI:
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#       -d .whl_peer scikit-learn==1.7.2 diffprivlib==0.6.6 scipy==1.17.1
#
# (scipy too: diffprivlib 0.6.6 passes `iprint` to scipy's fmin_l_bfgs_b, which newer scipy refuses.)
#
# Usage, from the repository root: bash benchmarks/zoo_remote.sh OUTDIR JOBS FAMILY [FAMILY ...]
# OUTDIR receives zoo.json and zoo.log; merge the rows here with
#   python benchmarks/zoo.py --family FAMILY --merge OUTDIR/zoo.json
set -u
OUT_DIR=$1
JOBS=$2
shift 2
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# skdp's dependencies from .whl/ (benchmarks/remote_wheels.sh).
source benchmarks/remote_wheels.sh
if [ -d .whl_peer ]; then
    # diffprivlib wants scikit-learn 1.7.2: its own site directory, put first by a wrapper
    # interpreter (the peer runs as a subprocess; skdp's processes keep their scikit-learn).
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/peer_site .whl_peer/*.whl || exit 1
    printf '#!/bin/sh\nPYTHONPATH=/tmp/peer_site exec %s "$@"\n' "$(command -v python3)" > /tmp/peer_python
    chmod +x /tmp/peer_python
    export SKDP_PEER_PYTHON_DIFFPRIVLIB=/tmp/peer_python
    /tmp/peer_python -c "import diffprivlib, sklearn; print('peer: diffprivlib', diffprivlib.__version__, 'scikit-learn', sklearn.__version__)"
fi
FAMILY_ARGS=()
for f in "$@"; do FAMILY_ARGS+=(--family "$f"); done
python3 -c "import os, sklearn, numpy, torch; print('cores', os.cpu_count(), '| scikit-learn', sklearn.__version__, '| numpy', numpy.__version__, '| torch', torch.__version__)"
timeout "${ZOO_TIMEOUT:-540}" python3 benchmarks/zoo.py "${FAMILY_ARGS[@]}" --jobs "$JOBS" 2>&1 | tee "$OUT_DIR/zoo.log"
# zoo.py writes each family's rows as soon as the family is done: what finished comes back.
cp benchmarks/results/zoo.json "$OUT_DIR/zoo.json"
