"""The OpenVINO runtime's compiled-blob folders under concurrent use (no openvino needed: the
folder's lock and record are modsenc's own)."""

from __future__ import annotations

import json
import threading
import time

from modsenc.runtimes.graph_cache import COMPILED_RECORD, compiled_folder, record_compiled


def test_a_compile_in_progress_is_waited_for_and_its_blob_kept(tmp_path) -> None:
    """Two Ray workers compiling one graph: the second used to find the first's blob written and
    not yet recorded, take it for a damaged one and delete it under the writer."""
    written, release, seen = threading.Event(), threading.Event(), {}

    def first() -> None:
        with compiled_folder(tmp_path, "key", "fp32") as folder:
            (folder / "1234.blob").write_bytes(b"compiled")  # OpenVINO's write, no record yet
            written.set()
            release.wait(10)
            record_compiled(folder)

    def second() -> None:
        written.wait(10)
        with compiled_folder(tmp_path, "key", "fp32") as folder:
            seen["files"] = sorted(p.name for p in folder.iterdir())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    written.wait(10)
    time.sleep(0.3)
    assert "files" not in seen  # the second waits for the first's compile
    release.set()
    for thread in threads:
        thread.join(10)
    assert seen["files"] == ["1234.blob", COMPILED_RECORD]
    record = json.loads((tmp_path / "compiled" / "key" / "fp32" / COMPILED_RECORD).read_text())
    assert list(record) == ["1234.blob"]


def test_blobs_without_a_record_are_still_emptied_once_nobody_is_compiling(tmp_path, caplog) -> None:
    folder = tmp_path / "compiled" / "key" / "bf16"
    folder.mkdir(parents=True)
    (folder / "99.blob").write_bytes(b"left by a killed compile")
    with compiled_folder(tmp_path, "key", "bf16") as ready:
        assert list(ready.iterdir()) == []
    assert "differ from their record; compiling again" in caplog.text
