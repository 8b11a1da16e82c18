"""The peers bench's vectors: all-MiniLM-L6-v2 (the numpy forward pass of
tests/support/embedding_server.py, which agrees with edudb's in-process
model within 1e-4 cosine), each text's vector computed once and kept in a
cache file, so that edudb (through its HTTP embedder) and every peer (given
the vectors) get the same vectors for the same texts, and a second run
embeds nothing.

    python vectors.py --cache FILE --port-file FILE   serve /v1/embeddings from the cache

The cache is append-only: records of a text's SHA-256 and its 384 float32
values, appended under an exclusive lock (two runs may share the file); a
torn last record (a killed run) is ignored on loading, and a vector that
is not of unit length (a damaged file) is an error.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import sys
import threading
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
import embedding_server  # noqa: E402 - the model and the HTTP handler

DIMENSION = 384
DIGEST = 32
RECORD = DIGEST + 4 * DIMENSION


class CachedModel:
    """A model whose `embed(texts)` answers cached texts from the cache
    file and embeds (and appends) the rest."""

    def __init__(self, cache: Path, model_dir: Path | None = None):
        self.path = cache
        self.model_dir = model_dir
        self.model = None
        self.lock = threading.Lock()
        self.vectors: dict[bytes, np.ndarray] = {}
        if cache.exists():
            data = cache.read_bytes()
            whole = len(data) - len(data) % RECORD
            for at in range(0, whole, RECORD):
                key = data[at : at + DIGEST]
                vector = np.frombuffer(data, "<f4", DIMENSION, at + DIGEST)
                if abs(float(np.dot(vector, vector)) - 1.0) > 1e-3:
                    raise SystemExit(f"{cache}: record {at // RECORD} is not a unit vector; remove the file")
                self.vectors[key] = vector

    def embed(self, texts):
        """(vectors (N, 384) float32, token count), as the server's model."""
        keys = [hashlib.sha256(t.encode()).digest() for t in texts]
        with self.lock:
            missing = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        if missing:
            first = {k: t for k, t in zip(keys, texts)}
            fresh, _ = self._model().embed([first[k] for k in missing])
            with self.lock:
                records = b"".join(key + vector.astype("<f4").tobytes() for key, vector in zip(missing, fresh))
                with open(self.path, "ab") as out:
                    fcntl.flock(out, fcntl.LOCK_EX)
                    out.write(records)
                for key, vector in zip(missing, fresh):
                    self.vectors[key] = vector.astype(np.float32)
        # No token count: a cached text costs nothing to answer.
        return np.stack([self.vectors[k] for k in keys]), 0

    def _model(self):
        if self.model is None:
            self.model = embedding_server.MiniLM(self.model_dir or embedding_server.default_model_dir())
        return self.model


def main():
    parser = argparse.ArgumentParser(description="serve cached all-MiniLM-L6-v2 vectors")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--model-dir", type=Path)
    args = parser.parse_args()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    server = embedding_server.Server(("127.0.0.1", 0), CachedModel(args.cache, args.model_dir))
    embedding_server.write_port_file(args.port_file, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
