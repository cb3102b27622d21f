import json

import jsonschema
import pytest

from orchestrace import dumps, generate_trace, native_schema


def test_schema_is_valid_draft_2020_12():
    schema = native_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_native_traces_validate(small_trace):
    v = jsonschema.Draft202012Validator(native_schema())
    for tr in (small_trace, generate_trace(20, 300, 2, seed=4)):
        v.validate(json.loads(dumps(tr)))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["events"][0].update(type="nope"),
        lambda d: d["events"][0].update(t=-1),
        lambda d: d["events"][0].pop("agent"),
        lambda d: d["events"][0].update(extra=1),
        lambda d: d["edges"][0].update(type="because"),
        lambda d: d.pop("schema_version"),
        lambda d: d.update(rewards={"team": "high"}),
    ],
)
def test_schema_rejects_what_the_decoder_rejects(small_trace, mutate):
    from orchestrace import loads
    from orchestrace.errors import TraceValidationError

    d = json.loads(dumps(small_trace))
    mutate(d)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(d, native_schema(), cls=jsonschema.Draft202012Validator)
    if "schema_version" in d:  # without it the file reads as the survey schema
        with pytest.raises(TraceValidationError):
            loads(json.dumps(d))
