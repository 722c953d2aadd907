"""Worlds: the registry, and the prose world giving exactly what its parts gave."""

import pytest
import torch

from dlmspec_min.measures.order import unconditional_prompt
from dlmspec_min.measures.tagger import classes_of_tokens, default_lexicon
from dlmspec_min.ssld import inputs
from dlmspec_min.worlds import WORLD_NAMES, get_world


def test_registry_names_the_catalogues_worlds_and_refuses_others():
    assert WORLD_NAMES[:2] == ("prose", "math")
    for name in WORLD_NAMES:
        w = get_world(name)
        assert w.name == name and len(w.ladder) == 3
        assert w.draft == w.ladder[0] and w.target == w.ladder[1]
        assert w.strong == w.ladder[2]
    with pytest.raises(ValueError, match="unknown world 'poetry'.*prose, math"):
        get_world("poetry")


def test_prose_world_roles_and_anchors_are_the_taggers():
    world = get_world("prose")
    tok = world.tokenizer()
    text = "The old man walked slowly to the river , and he sang ."
    ids = torch.tensor([tok(text)["input_ids"]])
    lexicon = default_lexicon()
    assert world.token_classes(tok, ids[0].tolist()) == classes_of_tokens(
        tok, ids[0].tolist(), lexicon)
    assert world.roles() == lexicon
    for unit in ("word", "piece"):
        assert torch.equal(inputs.anchor_mask(tok, ids, world.roles(), unit),
                           inputs.anchor_mask(tok, ids, lexicon, unit))
    assert torch.equal(world.prompts(tok, 3), unconditional_prompt(tok, 3))
