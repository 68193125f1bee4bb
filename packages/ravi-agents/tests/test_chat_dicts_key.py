"""A chat dict whose own metadata uses the key under which Ravi records how to give a stored dict back."""

from __future__ import annotations

import pytest

from ravi.agents.context.chat_dicts import KEY, from_chat_dict, to_chat_dict


@pytest.mark.parametrize("value", [None, "x", {"fields": ["id"]}, {"dict": {"role": "user"}}])
@pytest.mark.parametrize("request_", [False, True])
def test_a_dict_whose_metadata_holds_the_key_is_given_back_exactly(value: object, request_: bool) -> None:
    data = {"role": "user", "content": "hello", "metadata": {KEY: value, "other": 1}}
    assert to_chat_dict(from_chat_dict(data), request=request_) == data
