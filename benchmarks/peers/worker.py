"""Fit a peer's estimators inside the peer's own environment; run by ``benchmarks/_peers.py``.

Usage: ``<peer python> benchmarks/peers/worker.py JOB.json`` where the job is::

    {"estimator": "diffprivlib.models.KMeans",     # importable class path
     "arrays": "data.npz",                          # named arrays (np.savez)
     "output": "result.json",                       # where the result goes
     "tuple_params": ["bounds"],                    # JSON lists to pass as tuples
     "fits": [{"params": {...},                     # constructor keywords
               "X": "X", "y": null,                 # names of arrays in data.npz
               "predict": ["X"],                    # predict on these arrays
               "score": [["Xt", "yt"]],             # estimator.score on these pairs
               "transform": ["Xt"],                 # transform these arrays (transformers)
               "attributes": ["cluster_centers_"]}]}  # fitted attributes to return

The result is ``{"versions": {...}, "fits": [{"fit_seconds", "predict",
"score", "transform", "attributes"}]}`` in JSON (arrays as nested lists; Python's float
repr round-trips, so no digit is lost).  Only the standard library, numpy and
the peer are imported here: skdp is not installed in a peer environment.
Warnings of the peer (diffprivlib's PrivacyLeakWarning and the like) are
silenced, as the benchmarks silence them for skdp's own estimators.
"""

import importlib
import importlib.metadata
import json
import sys
import time
import warnings

import numpy as np


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def run(job):
    module_name, _, class_name = job["estimator"].rpartition(".")
    estimator = getattr(importlib.import_module(module_name), class_name)
    with np.load(job["arrays"]) as data:
        arrays = {k: data[k] for k in data.files}
    results = []
    for fit in job["fits"]:
        params = dict(fit.get("params", {}))
        # JSON has no tuples; some peers insist on one (diffprivlib's bounds=(lower, upper)).
        for name in job.get("tuple_params", []):
            if name in params:
                params[name] = tuple(params[name])
        est = estimator(**params)
        X = arrays[fit["X"]]
        y = arrays[fit["y"]] if fit.get("y") else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            est.fit(X) if y is None else est.fit(X, y)
            seconds = time.perf_counter() - start
            predict = {name: _jsonable(est.predict(arrays[name])) for name in fit.get("predict", [])}
            score = [float(est.score(arrays[a], arrays[b])) for a, b in fit.get("score", [])]
            transform = {name: _jsonable(est.transform(arrays[name])) for name in fit.get("transform", [])}
        attributes = {name: _jsonable(getattr(est, name)) for name in fit.get("attributes", [])}
        results.append(
            {
                "fit_seconds": seconds,
                "predict": predict,
                "score": score,
                "transform": transform,
                "attributes": attributes,
            }
        )
    versions = {}
    for dist in job.get("versions", []):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {"versions": versions, "fits": results}


def main(argv):
    with open(argv[1]) as f:
        job = json.load(f)
    result = run(job)
    with open(job["output"], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
