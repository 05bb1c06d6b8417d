# Sourced by benchmarks/cuda_check.sh and benchmarks/zoo_remote.sh on a lent machine with no
# network: skdp's dependencies that its Python lacks travel as wheels in .whl/ (the commands that
# make them are in those scripts' headers) and are installed into a private site directory put on
# PYTHONPATH after the repository root.  Without .whl/ only the repository root is added.
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/skdp_site .whl/*.whl || exit 1
    export PYTHONPATH="$PWD:/tmp/skdp_site"
else
    export PYTHONPATH="$PWD"
fi
