"""Benchmark scripts of skdp; ``python -m benchmarks`` runs them all (see ``run_all.py``).

This file makes ``benchmarks/`` a regular package on purpose: opacus (a
benchmark peer) installs a top-level ``benchmarks`` package into
site-packages, which would shadow a namespace package of the same name and
break ``python -m benchmarks``. The scripts themselves run standalone.
"""
