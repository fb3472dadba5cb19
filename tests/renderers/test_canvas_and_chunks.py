"""All cameras on one canvas and back; chunks that cover the episode with the contract's overlap;
joins at the overlap frame where adjacent chunks differ least, every frame written exactly once;
H.264 videos whose frame i is stamped i / fps."""

from __future__ import annotations

import numpy as np
import pytest

from datafarm.renderers.chunks import ChunkSpan, choose_join, plan_chunks
from datafarm.renderers.layout import CanvasLayout, make_layout
from datafarm.renderers.pipeline import Stitcher
from datafarm.renderers.video import VideoWriter, encode_video, read_video


def test_three_cameras_tile_a_2x2_canvas_and_split_back_exactly() -> None:
    layout = make_layout(["front", "left", "right"], 320, 240)
    assert (layout.columns, layout.rows, layout.width, layout.height) == (2, 2, 640, 480)
    rng = np.random.default_rng(0)
    images = {c: rng.integers(0, 256, (240, 320, 3), dtype=np.uint8) for c in layout.cameras}
    canvas = layout.compose(images)
    back = layout.split(canvas)
    assert all(np.array_equal(back[c], images[c]) for c in images)
    assert (canvas[240:, 320:] == 96).all()  # the unused cell is flat grey
    assert CanvasLayout.model_validate(layout.model_dump()) == layout  # recorded and read back
    assert layout.describe() == "2 x 2 grid: top row front, left; bottom row right"
    assert make_layout(["a", "b"], 320, 240).columns == 2 and make_layout(["a"], 320, 240).rows == 1
    with pytest.raises(ValueError, match="tile"):
        layout.compose({**images, "left": images["left"][:100]})


@pytest.mark.parametrize("frames,chunk,overlap", [(40, 16, 4), (16, 16, 4), (5, 16, 4), (100, 81, 8), (30, 5, 4)])
def test_chunks_cover_every_frame_and_overlap_by_the_contract_s_amount(frames: int, chunk: int, overlap: int) -> None:
    spans = plan_chunks(frames, chunk, overlap, seed=3)
    assert spans[0].start == 0 and spans[-1].stop == frames
    for a, b in zip(spans, spans[1:], strict=False):
        assert a.stop - b.start == overlap and b.start > a.start
    assert all(s.frames <= chunk for s in spans)
    assert len({s.seed for s in spans}) == len(spans)
    assert [s.seed for s in plan_chunks(frames, chunk, overlap, seed=3)] == [s.seed for s in spans]
    with pytest.raises(ValueError):
        plan_chunks(frames, 4, 4)


def test_the_join_is_the_overlap_frame_where_the_chunks_differ_least() -> None:
    base = np.full((8, 8, 3), 100, dtype=np.uint8)
    earlier = [base + d for d in (0, 0, 0, 0)]
    later = [base + d for d in (9, 4, 1, 6)]
    join = choose_join(earlier, later, overlap_start=12, before=0, after=1)
    assert (join.frame, join.difference) == (14, 1.0)
    assert join.differences == [9.0, 4.0, 1.0, 6.0] and join.overlap == (12, 16)


def _chunk_outputs(span: ChunkSpan, quiet_at: int | None) -> list[np.ndarray]:
    """Frames that encode (frame, chunk) and differ from the previous chunk's except at `quiet_at`,
    where this chunk shows what the previous one shows."""
    out = []
    for i in range(span.start, span.stop):
        image = np.zeros((4, 4, 3), dtype=np.uint8)
        image[..., 0] = i
        image[..., 1] = 10 * (span.index - 1) if i == quiet_at else 10 * span.index
        out.append(image)
    return out


@pytest.mark.parametrize("frames,chunk,overlap", [(40, 16, 4), (30, 5, 4), (9, 4, 2)])
def test_stitching_writes_every_frame_once_from_the_right_chunk(frames: int, chunk: int, overlap: int) -> None:
    spans = plan_chunks(frames, chunk, overlap)
    written: list[np.ndarray] = []
    stitch = Stitcher(written.append)
    quiet = {}
    for k, span in enumerate(spans):
        nxt = spans[k + 1].start if k + 1 < len(spans) else None
        # the quietest frame of the join with the previous chunk: the last overlap frame before the next overlap
        quiet[k] = min(span.start + overlap - 1, nxt - 1) if k and nxt is not None else span.start + overlap - 1
        stitch.add(span, _chunk_outputs(span, quiet[k] if k else None), nxt)
    assert [int(w[0, 0, 0]) for w in written] == list(range(frames))
    assert len(stitch.joins) == len(spans) - 1
    for join in stitch.joins:
        assert join.frame == quiet[join.after] and join.difference == 0.0
        assert len(join.differences) == 1 or max(join.differences) == pytest.approx(10 / 3)
        before = [int(w[0, 0, 1]) for w in written[spans[join.after].start:join.frame]]
        assert all(v == 10 * join.before for v in before)  # before the join: the earlier chunk


def test_videos_are_h264_with_frame_i_at_i_over_fps(tmp_path) -> None:
    frames = [np.full((24, 32, 3), 8 * i, dtype=np.uint8) for i in range(12)]
    with VideoWriter(tmp_path / "v.mp4", 32, 24, fps=20) as writer:
        for f in frames:
            writer.write(f)
    decoded, times = read_video(tmp_path / "v.mp4")
    assert len(decoded) == 12 and times == pytest.approx([i / 20 for i in range(12)])
    assert np.abs(decoded[:, 8:16, 8:16].astype(int).mean(axis=(1, 2, 3)) - [8 * i for i in range(12)]).max() < 3
    assert encode_video(frames, 20) == encode_video(frames, 20)  # same frames, same bytes
    with pytest.raises(ValueError, match="even"):
        VideoWriter(tmp_path / "odd.mp4", 33, 24, fps=20)
