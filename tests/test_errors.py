"""User-facing errors keep their details across process boundaries (process pools pickle them)."""

import pickle

from datafarm.errors import InputError, Problem, input_error


def test_input_error_survives_pickling_with_every_problem():
    e = InputError([Problem("bad", file="x.yaml", line=3, field="f", hint="did you mean 'g'?"), Problem("worse")])
    back = pickle.loads(pickle.dumps(e))
    assert isinstance(back, InputError)
    assert [p.line for p in back.problems] == [3, None]
    assert str(back) == str(e) and back.exit_code == 2


def test_problem_renders_file_line_field_expected_hint():
    text = str(input_error("unknown key", file="r.yaml", line=4, field="mdoe", expected="a known key", hint="did you mean 'mode'?"))
    assert text == "r.yaml:4: mdoe: unknown key (expected a known key); did you mean 'mode'?"
