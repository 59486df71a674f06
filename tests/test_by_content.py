"""Files found by content: every version of a path in HEAD's history is read in one batch, past blobs the clone
lacks."""

from __future__ import annotations

from kcontract.sassdiff import by_content
from tests.helpers.receipts import commit_all, git


def test_a_blob_the_clone_lacks_is_skipped_and_the_versions_after_it_are_read(tmp_path):
    (tmp_path / "k.cu").write_text("first\n")
    commit_all(tmp_path)
    (tmp_path / "k.cu").write_text("second, longer\n")
    commit_all(tmp_path)
    blobs = by_content._blobs(tmp_path, "k.cu")
    assert len(blobs) == 2
    read = list(by_content._contents(tmp_path, [blobs[0], "0" * 40, blobs[1]]))
    assert read == [b"second, longer\n", b"first\n"]
    assert git(tmp_path, "rev-parse", "--is-shallow-repository") == "false" and not by_content.is_shallow(tmp_path)
