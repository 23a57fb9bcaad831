"""Remote checkpoints: an `http://` location served on 127.0.0.1 by a small
server that answers Range requests with an ETag, as a CDN does. The module
reads what the command line reads, into new arrays (never views)."""

import hashlib
import http.server
import json
import os
import re
import struct
import threading

import numpy as np
import pytest

import tensorscope


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    root = None
    requests = None

    def log_message(self, *args):
        pass

    def _file(self):
        path = os.path.join(self.root, self.path.lstrip("/").split("?")[0])
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        with open(path, "rb") as f:
            return f.read()

    def do_HEAD(self):
        data = self._file()
        if data is None:
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", '"%s"' % hashlib.sha256(data).hexdigest()[:16])
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self):
        data = self._file()
        if data is None:
            return
        self.requests.append(self.headers.get("Range"))
        etag = '"%s"' % hashlib.sha256(data).hexdigest()[:16]
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def served(tmp_path, monkeypatch):
    root = tmp_path / "www"
    root.mkdir()
    monkeypatch.setenv("TENSORSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    handler = type("Handler", (_RangeHandler,), {"root": str(root), "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="range-server", daemon=True)
    thread.start()
    yield root, "http://127.0.0.1:%d" % server.server_address[1], handler.requests
    server.shutdown()
    server.server_close()
    thread.join()


def _safetensors(path, arrays, metadata=None):
    header, data = {}, b""
    names = {np.dtype("<f4"): "F32", np.dtype("<i8"): "I64", np.dtype("<f2"): "F16"}
    for name, a in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_a_remote_safetensors_file_reads_as_the_local_one(served):
    root, url, requests = served
    rng = np.random.default_rng(3)
    arrays = {
        "w": rng.standard_normal((64, 32)).astype(np.float32),
        "n": np.arange(10, dtype=np.int64),
        "h": rng.standard_normal((5,)).astype(np.float16),
    }
    _safetensors(root / "model.safetensors", arrays, {"format": "np"})
    location = url + "/model.safetensors"
    with tensorscope.safe_open(location, framework="np") as f:
        assert f.keys() == sorted(arrays)
        assert f.metadata() == {"format": "np"}
        for name, a in arrays.items():
            got = f.get_tensor(name)
            assert got.dtype == a.dtype and got.shape == a.shape
            assert got.tobytes() == a.tobytes()
        assert np.array_equal(f.get_slice("w")[3:9, ::4], arrays["w"][3:9, ::4])
    assert all(r is None or r.startswith("bytes=") for r in requests)
    loaded = tensorscope.load_file(location)
    assert loaded.keys() == arrays.keys()
    assert tensorscope.info(location)["path"] == location


def test_a_remote_file_that_is_not_there_is_an_error(served):
    _, url, _ = served
    with pytest.raises(tensorscope.TensorscopeError) as e:
        tensorscope.safe_open(url + "/missing.safetensors")
    assert e.value.kind
    assert "404" in str(e.value) or "not found" in str(e.value).lower()
