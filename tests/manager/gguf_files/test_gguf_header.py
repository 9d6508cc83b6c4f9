"""The GGUF header parser against files the gguf package's GGUFWriter wrote, and its reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFValueType

from manager.gguf import header as header_module
from manager.gguf.byte_source import FileSource, HeaderReadError
from manager.gguf.header import SkippedArray, read_header
from manager.gguf.model_facts import model_facts
from tests.support.tiny_gguf import write_tiny_gguf


class CountingSource(FileSource):
    """A FileSource that records each read (offset, length), to see what the parser fetches."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[tuple[int, int]] = []

    def read_at(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return super().read_at(offset, length)


def test_every_key_matches_the_gguf_packages_reader(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf", vocab=500)
    header = read_header(FileSource(path))
    reference = GGUFReader(path)
    assert header.tensor_count == len(reference.tensors) == 1
    for name, entry in reference.fields.items():
        if name.startswith("GGUF."):
            continue  # NOTE: the reader's own pseudo-fields (version, counts)
        ours = header.get(name)
        if entry.types[0] == GGUFValueType.ARRAY:
            if entry.types[-1] == GGUFValueType.STRING:
                assert ours == SkippedArray(ours.item_type, len(entry.data)), name  # type: ignore[union-attr]
            else:
                assert ours == tuple(entry.contents()), name
        else:
            assert ours == entry.contents(), name


def test_model_facts_of_a_llama_header(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf", layers=3, heads=8, kv_heads=2, embedding=128)
    facts = model_facts(read_header(FileSource(path)), str(path))
    assert facts.architecture == "llama"
    assert facts.name == "Tiny"
    assert facts.block_count == 3
    assert facts.context_length == 2048
    assert facts.kv_heads_per_layer == (2, 2, 2)
    assert (facts.key_length, facts.value_length) == (16, 16)  # embedding / heads


def test_per_layer_kv_heads_and_explicit_key_value_lengths(tmp_path: Path) -> None:
    path = write_tiny_gguf(
        tmp_path / "tiny.gguf", layers=3, kv_heads=[1, 2, 4], key_length=96, value_length=64
    )
    facts = model_facts(read_header(FileSource(path)), str(path))
    assert facts.kv_heads_per_layer == (1, 2, 4)
    assert (
        facts.kv_cache_bytes(context_tokens=10, dtype_bytes=2) == (1 + 2 + 4) * (96 + 64) * 2 * 10
    )


def test_small_chunks_read_the_same_header_and_stop_at_the_tensor_infos(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf", vocab=2000, padding_bytes=1 << 20)
    whole = read_header(FileSource(path))
    monkeypatch.setattr(header_module, "FIRST_READ_BYTES", 64)
    monkeypatch.setattr(header_module, "MAX_READ_BYTES", 4096)
    source = CountingSource(path)
    chunked = read_header(source)
    assert chunked == whole
    assert len(source.reads) > 5
    read_up_to = max(offset + length for offset, length in source.reads)
    assert whole.metadata_end <= read_up_to < whole.metadata_end + 4096
    assert read_up_to < path.stat().st_size - (1 << 19)  # the weights were never read


def test_a_truncated_header_is_one_error(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(HeaderReadError, match="truncated"):
        read_header(FileSource(cut))


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(HeaderReadError, match="not a GGUF file"):
        read_header(FileSource(path))


def test_a_header_without_block_count_says_which_key(tmp_path: Path) -> None:
    from gguf import GGUFWriter

    path = tmp_path / "bare.gguf"
    writer = GGUFWriter(path, "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(HeaderReadError, match="llama.block_count"):
        model_facts(read_header(FileSource(path)), str(path))
