"""The bench's L2 flush reads a buffer far larger than any L2 on the timing stream, and writes nothing: a timed call
then evicts only clean lines."""

from __future__ import annotations

from kcontract.bench.ceiling import READ_SOURCE
from kcontract.bench.timing import FLUSH_BYTES, Timer
from tests.helpers.recording_cupy import RecordingCupy


def test_the_flush_reads_its_whole_buffer_on_the_timing_stream_and_writes_nothing():
    cupy = RecordingCupy(sms=132)
    timer = Timer(cupy)
    before = len(cupy.events)
    timer.flush()
    ((kind, name, grid, block, args, stream),) = cupy.events[before:]
    assert (kind, name, grid, block) == ("launch", "read_all", (132 * 8,), (512,))
    assert args[0] is timer.flush_buf and args[0].nbytes == FLUSH_BYTES and int(args[1]) == FLUSH_BYTES // 16
    assert stream is timer.stream
    assert "read_all" in READ_SOURCE and "__ldg" in READ_SOURCE
