"""A ``.safetensors`` file read with plain file reads: a whole tensor, or a block of a matrix's rows.

The ``safetensors`` package maps the file into memory, and every page a read touches then counts
in the process's resident memory until the file is closed: reading two 3.8 GB checkpoints tensor by
tensor ends with 7.6 GB resident. Reading with ``readinto`` instead leaves those pages to the OS page
cache, so resident memory holds only the tensors and blocks in use. The format: an 8-byte
little-endian header length, a JSON header ``{name: {dtype, shape, data_offsets: [begin, end]}}``
(offsets from the end of the header; ``__metadata__`` skipped), then the raw little-endian data.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import torch

from rlvr.errors import UserError

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}
MAX_HEADER = 100 << 20


class SafetensorsFile:
    """One open ``.safetensors`` file: its tensors' names, shapes and dtypes, read on request."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if sys.byteorder != "little":
            raise UserError("reading safetensors without mmap needs a little-endian machine")
        self._file = self.path.open("rb")
        try:
            self.entries, self._data_start = self._header()
        except (ValueError, KeyError, TypeError, struct.error) as e:
            self._file.close()
            raise UserError(f"cannot read {self.path} as safetensors ({e}); pass a valid file") from None

    def _header(self) -> tuple[dict[str, dict], int]:
        (size,) = struct.unpack("<Q", self._file.read(8))
        if size > MAX_HEADER:
            raise ValueError(f"header of {size} bytes")
        header = json.loads(self._file.read(size))
        entries = {name: entry for name, entry in header.items() if name != "__metadata__"}
        for entry in entries.values():
            if entry["dtype"] not in DTYPES:
                raise ValueError(f"dtype {entry['dtype']} not supported")
            entry["shape"] = [int(d) for d in entry["shape"]]
        return entries, 8 + size

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> list[str]:
        return list(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.entries[name]["shape"])

    def dtype(self, name: str) -> torch.dtype:
        return DTYPES[self.entries[name]["dtype"]]

    def _read(self, name: str, offset: int, count: int, shape: tuple[int, ...]) -> torch.Tensor:
        """``count`` elements from element ``offset`` of tensor ``name``, as a tensor of ``shape``."""
        dtype = self.dtype(name)
        size = torch.empty((), dtype=dtype).element_size()
        begin, end = self.entries[name]["data_offsets"]
        if (offset + count) * size > end - begin:
            raise UserError(f"{self.path}: tensor {name!r} is truncated; pass a complete file")
        out = torch.empty(count * size, dtype=torch.uint8)
        self._file.seek(self._data_start + begin + offset * size)
        if self._file.readinto(memoryview(out.numpy())) != count * size:
            raise UserError(f"{self.path}: tensor {name!r} is truncated; pass a complete file")
        return out.view(dtype).reshape(shape)

    def get(self, name: str) -> torch.Tensor:
        """The whole tensor."""
        shape = self.shape(name)
        return self._read(name, 0, int(torch.Size(shape).numel()), shape)

    def rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        """Rows start..stop-1 of a 2-D tensor: (stop - start, n)."""
        m, n = self.shape(name)
        start, stop = max(0, start), min(m, stop)
        return self._read(name, start * n, (stop - start) * n, (stop - start, n))


class TensorFileRows:
    """:class:`rlvr.analysis.row_blocks.Rows` of a 2-D tensor of a :class:`SafetensorsFile`."""

    def __init__(self, file: SafetensorsFile, name: str):
        m, n = file.shape(name)
        self.file, self.name, self.shape, self.dtype = file, name, (m, n), file.dtype(name)

    def block(self, start: int, stop: int) -> torch.Tensor:
        return self.file.rows(self.name, start, stop)
