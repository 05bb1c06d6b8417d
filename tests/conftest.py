"""Shared fixtures of the test suite."""

import pytest


@pytest.fixture
def chunk_passes(monkeypatch):
    """A list that grows by one entry per pass any chunked fit makes over its data.

    Patches :meth:`skdp._chunks.ChunkedData.iter_chunks` for the test; clear the
    list (``passes[:] = []``) between fits.
    """
    from skdp._chunks import ChunkedData

    passes = []
    original = ChunkedData.iter_chunks

    def iter_chunks(self):
        passes.append(None)
        return original(self)

    monkeypatch.setattr(ChunkedData, "iter_chunks", iter_chunks)
    return passes
