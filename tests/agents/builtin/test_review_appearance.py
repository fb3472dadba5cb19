"""The builtin reviewer's appearance claim on drawn frames whose truth is known: an object hidden by
another one in front of it (a cup nested in another) is not taken for a recoloured one, but an
object that is in front and shows another's colour is; an object recoloured in the open is caught;
an object whose colour stands out from its surroundings in no reference frame (a grey scale on a
grey table) is compared as its whole box, which catches it recoloured."""

from __future__ import annotations

import numpy as np

from datafarm.agents.builtin.review_checks import (
    CameraFacts,
    FrameSet,
    KeyframeRegions,
    ObjectFacts,
    Regions,
    ReviewFacts,
    _Review,
    appearance_claim,
    motion_claim,
    reference_colours,
)

WIDTH, HEIGHT = 160, 120
TABLE = (150, 150, 150)
RED, BLUE, GREEN = (200, 40, 40), (40, 60, 200), (40, 190, 60)
GREY = (160, 160, 158)
"""An object colour that does not stand out from TABLE (ΔE well under the reviewer's 15)."""

RED_START, BLUE_BOX = (20, 40, 50, 80), (90, 35, 135, 85)
RED_NESTED = (100, 45, 125, 80)
"""Where red ends: inside blue's box."""


def _frame(*draws: tuple[tuple[int, int, int, int], tuple[int, int, int]]) -> np.ndarray:
    image = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    image[:] = TABLE
    for (x0, y0, x1, y1), colour in draws:
        image[y0:y1, x0:x1] = colour
    return image


def _facts(red_end_depths: tuple[float, float], blue_depths: tuple[float, float], *, ids=("red", "blue")) -> ReviewFacts:
    red, blue = ids
    start = KeyframeRegions(frame=0, objects={red: RED_START, blue: BLUE_BOX},
                            depths={red: (1.0, 1.1), blue: blue_depths})
    end = KeyframeRegions(frame=10, objects={red: RED_NESTED, blue: BLUE_BOX},
                          depths={red: red_end_depths, blue: blue_depths})
    reference = Regions(objects={red: RED_START, blue: BLUE_BOX}, depths={red: (1.0, 1.1), blue: blue_depths})
    camera = CameraFacts(camera="front", reference_frames=[0], keyframes=[start, end], reference=reference)
    objects = [ObjectFacts(id=red, kind="cup", start=(0.0, 0.0, 0.0), end=(0.3, 0.0, 0.0), moved_m=0.3, moved=True),
               ObjectFacts(id=blue, kind="cup", start=(0.3, 0.0, 0.0), end=(0.3, 0.0, 0.0), moved_m=0.0, moved=False)]
    return ReviewFacts(episode_id="drawn", frames=11, fps=10.0, resolution=(WIDTH, HEIGHT), keyframes=[0, 10],
                       cameras=[camera], objects=objects)


def _appearance(facts: ReviewFacts, reference: np.ndarray, first: np.ndarray, last: np.ndarray):
    frames = FrameSet(rendered={"front": {0: first, 10: last}}, references={"front": {0: reference}}, refusals={})
    review = _Review(facts, frames)
    return appearance_claim(review, reference_colours(review))


def _notes(claim) -> str:
    return "\n".join(e.note for e in claim.evidence)


REFERENCE = _frame((RED_START, RED), (BLUE_BOX, BLUE))
FIRST = REFERENCE
NESTED = _frame((RED_NESTED, RED), (BLUE_BOX, BLUE))
"""The last frame as the sim has it with blue in front: only blue's colour shows in red's box."""
NESTED[RED_NESTED[1]:RED_NESTED[3], RED_NESTED[0]:RED_NESTED[2]] = BLUE


def test_an_object_hidden_by_one_in_front_of_it_is_not_taken_for_recoloured() -> None:
    # blue's nearest point (0.9 m) is nearer than red's farthest (1.0 m): blue can hide red
    claim = _appearance(_facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05)), REFERENCE, FIRST, NESTED)
    assert claim.holds, _notes(claim)
    assert "frame 10: hidden by the robot or by blue in front" in _notes(claim)


def test_an_object_in_front_drawn_in_another_colour_is_caught() -> None:
    # the last frame shows green where red sits: with blue in front that is blue's business (red is
    # hidden, not judged there); with red wholly nearer than blue (red's farthest 0.8 m < blue's
    # nearest 0.9 m) nothing can hide red, so it is red drawn wrong
    wrong = _frame((BLUE_BOX, BLUE), (RED_NESTED, GREEN))
    behind = _appearance(_facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05)), REFERENCE, FIRST, wrong)
    assert behind.holds, _notes(behind)
    claim = _appearance(_facts(red_end_depths=(0.7, 0.8), blue_depths=(0.9, 1.05)), REFERENCE, FIRST, wrong)
    assert not claim.holds
    assert "red: real colour" in _notes(claim) and "NOT its real colour" in _notes(claim)


def test_an_object_recoloured_in_the_open_is_caught() -> None:
    recoloured = _frame((RED_START, GREEN), (BLUE_BOX, BLUE))
    claim = _appearance(_facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05)), REFERENCE, recoloured, NESTED)
    assert not claim.holds
    assert "NOT its real colour" in _notes(claim)


def test_an_object_that_never_stands_out_is_compared_whole_and_caught_recoloured() -> None:
    facts = _facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05), ids=("cup", "scale"))
    reference = _frame((RED_START, RED), (BLUE_BOX, GREY))
    last = _frame((BLUE_BOX, GREY), (RED_NESTED, RED))  # the cup ends on the scale, in front of it
    facts.camera("front").keyframes[1].depths["cup"] = (0.7, 0.8)

    claim = _appearance(facts, reference, reference, last)
    assert claim.holds, _notes(claim)
    assert "scale: its colour stands out from its surroundings in no reference frame" in _notes(claim)
    assert "looks as in the real frames" in _notes(claim)

    painted = _frame((RED_START, RED), (BLUE_BOX, GREEN))
    claim = _appearance(facts, reference, painted, last)
    assert not claim.holds
    assert "scale" in _notes(claim) and "does NOT look as in the real frames" in _notes(claim)


def _motion(facts: ReviewFacts, reference: np.ndarray, first: np.ndarray, last: np.ndarray):
    frames = FrameSet(rendered={"front": {0: first, 10: last}}, references={"front": {0: reference}}, refusals={})
    review = _Review(facts, frames)
    return motion_claim(review, reference_colours(review))


def test_a_moved_object_shut_away_behind_another_is_not_taken_for_missing() -> None:
    # red ends wholly inside blue's box with blue in front (a block shut in a drawer): its end place
    # cannot be seen, so that view is checked at the start only; with red in front it must be seen there
    shut = _frame((BLUE_BOX, BLUE))
    behind = _motion(_facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05)), REFERENCE, FIRST, shut)
    assert behind.holds, _notes(behind)
    assert "red (moved): in frame 10 the sim puts blue in front of it" in _notes(behind)
    assert "its real colour found in frame 0" in _notes(behind) and "as the sim says" in _notes(behind)
    # where it is in view (its start) it must still be seen: a render that lost it there is caught
    lost = _motion(_facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05)), REFERENCE, _frame((BLUE_BOX, BLUE)), shut)
    assert not lost.holds and "not where the sim puts it" in _notes(lost)
    # hidden at both keyframes in every view: a moved object nobody could see is not taken on trust
    facts = _facts(red_end_depths=(0.95, 1.0), blue_depths=(0.9, 1.05))
    start = facts.camera("front").keyframes[0]
    start.objects["red"], start.depths["red"] = RED_NESTED, (0.95, 1.0)
    unseen = _motion(facts, REFERENCE, shut, shut)
    assert not unseen.holds and "could be seen at neither keyframe in any camera" in _notes(unseen)
    in_front_of_it = _motion(_facts(red_end_depths=(0.7, 0.8), blue_depths=(0.9, 1.05)), REFERENCE, FIRST, shut)
    assert not in_front_of_it.holds
    assert "not where the sim puts it" in _notes(in_front_of_it)
