"""The naming probe (evaluation/naming_probe.py): ranks, candidate arrays, and its
scores against a direct teacher-forced computation with the real Captioner."""
import json
import os

import jax
import numpy as np
import pytest

from cc12m_jax import config_rules
from cc12m_jax.core import evaluator as evaluator_lib
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import pipeline
from cc12m_jax.data.text import special_tokens
from cc12m_jax.data.text.tokenizer import SubwordTokenizer
from cc12m_jax.evaluation import naming_probe
from cc12m_jax.evaluation import registry as eval_registry
from cc12m_jax.train import state as state_lib
from configs import synthetic_finetune
from tests.synthetic_world import make_world


def test_rank_counts_only_strictly_higher_concepts_not_shown():
  names = ["ant", "bee", "cat", "dog", "eel"]
  scores = np.array([-1.0, -3.0, -2.0, -0.5, -2.0], np.float32)
  # dog (-0.5) is shown too, so it does not compete with ant or cat.
  assert naming_probe.ranks_of_pairs(scores, names, ["ant", "dog"]) == {"ant": 1, "dog": 1}
  # cat ties with eel (not shown): a tie is not ranked above; ant and dog are.
  assert naming_probe.ranks_of_pairs(scores, names, ["cat"]) == {"cat": 3}
  assert naming_probe.ranks_of_pairs(scores, names, ["bee"]) == {"bee": 5}


def test_summary_per_domain_and_overall_by_hand():
  ranks = {"i1": {"ant": 1, "bee": 4}, "i2": {"cat": 2}, "i3": {"dog": 10}}
  domains = {"i1": "in-domain", "i2": "out-domain", "i3": "out-domain"}
  s = naming_probe.summarize(ranks, domains)
  assert list(s) == ["in-domain", "out-domain", "overall"]
  assert s["in-domain"] == {"naming_R@1": 0.5, "naming_R@5": 1.0,
                            "naming_MRR": (1 + 1 / 4) / 2, "pairs": 2}
  assert s["out-domain"]["naming_R@1"] == 0.0 and s["out-domain"]["naming_R@5"] == 0.5
  assert s["overall"]["pairs"] == 4
  assert s["overall"]["naming_MRR"] == pytest.approx((1 + 1 / 4 + 1 / 2 + 1 / 10) / 4)
  # No domain labels (a Flickr-style source): overall only.
  assert list(naming_probe.summarize(ranks, {})) == ["overall"]


def test_prefixes_parse_and_repeats_fail():
  assert naming_probe.parse_prefixes("a") == ("a",)
  assert naming_probe.parse_prefixes(",a, the") == ("", "a", "the")
  with pytest.raises(ValueError, match="repeated"):
    naming_probe.parse_prefixes("a,a")


def test_candidate_arrays_weigh_only_the_name(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(list(special_tokens.RESERVED_TOKENS)
                             + ["a", "hot", "dog", "jelly", "##fish"]) + "\n")
  tok = SubwordTokenizer(str(vocab))
  inputs, targets, weights = naming_probe.candidate_arrays(tok, ["hot dog", "jellyfish"],
                                                           ["", "a"])
  a, hot, dog, jelly, fish = (tok.vocab.index(w) for w in ("a", "hot", "dog", "jelly", "##fish"))
  bos = special_tokens.BOS_ID
  assert inputs.shape == targets.shape == weights.shape == (4, 4)  # 1 + |a| + 2 pieces
  np.testing.assert_array_equal(inputs, [[bos, hot, 0, 0], [bos, jelly, 0, 0],
                                         [bos, a, hot, 0], [bos, a, jelly, 0]])
  np.testing.assert_array_equal(targets, [[hot, dog, 0, 0], [jelly, fish, 0, 0],
                                          [a, hot, dog, 0], [a, jelly, fish, 0]])
  np.testing.assert_array_equal(weights, [[1, 1, 0, 0], [1, 1, 0, 0],
                                          [0, 1, 1, 0], [0, 1, 1, 0]])
  # Only the name's positions reach the vocabulary projection.
  at, picked, mask = naming_probe.name_positions(targets, weights)
  np.testing.assert_array_equal(at, [[0, 1], [0, 1], [1, 2], [1, 2]])
  np.testing.assert_array_equal(picked, [[hot, dog], [jelly, fish], [hot, dog], [jelly, fish]])
  np.testing.assert_array_equal(mask, np.ones((4, 2)))
  # A shorter name is padded: position 0, weight 0.
  at, picked, mask = naming_probe.name_positions(
      np.array([[a, dog, 0], [a, hot, dog]]), np.array([[0, 1, 0], [0, 1, 1]], np.float32))
  np.testing.assert_array_equal(at, [[1, 0], [1, 2]])
  np.testing.assert_array_equal(picked, [[dog, 0], [hot, dog]])
  np.testing.assert_array_equal(mask, [[1, 0], [1, 1]])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> str:
  return make_world(str(tmp_path_factory.mktemp("world")),
                    num_concepts=40, feature_dim=16, vocab_size=300, num_cc3m=20,
                    num_cc12m=40, num_coco_train=20, num_coco_val=6, num_nocaps_val=9,
                    num_flickr=6)


def _config(data_dir: str):
  config = synthetic_finetune.get_config()
  config.mode = "evaluate"
  config.data.data_dir = data_dir
  config.data.eval_sources = "nocaps_val"
  config.data.eval_global_batch_size = 8
  config.data.max_caption_length = 12
  config.synthetic.num_concepts = 40
  config.eval.evaluator = "naming"
  config.eval.naming_prefixes = ",a"
  m = config.model
  m.emb_dim, m.num_heads, m.mlp_dim = 16, 2, 32
  m.num_encoder_layers = m.num_decoder_layers = 1
  return config


def test_probe_scores_equal_direct_teacher_forcing(world, tmp_path, monkeypatch):
  # Small chunks, so concepts span several chunks and the last one is padded.
  monkeypatch.setattr(naming_probe, "_ROWS_PER_CHUNK", 8 * 7)
  config = _config(world)
  config_rules.validate(config)
  setup = RunSetup(config)
  params = state_lib.TrainSetup(setup, config.optim).new_state(0)["params"]
  probe = eval_registry.build(config, setup)["nocaps_val"]
  assert isinstance(probe, naming_probe.NamingProbeEvaluator)
  assert probe.chunk == 7 and len(probe.names) == 40
  scores = probe.image_scores(params)

  # Direct: the model's own forward pass on each "<prefix> <name>" caption
  # (all of one image's captions in one batch, end-padded: the decoder is
  # causal), summing log-probabilities of the name's pieces only.
  tok = probe.eval_iterator.tokenizer
  batch = next(iter(probe.eval_iterator))
  index = np.asarray(batch["example_index"])
  image_keys = [k for k in pipeline.DEVICE_KEYS if k in batch
                and k not in ("decoder_inputs", "decoder_targets")]
  forward = jax.jit(lambda p, b: setup.model.apply({"params": p}, b, train=False))
  captions = [(tok.encode(prefix) if prefix else [], tok.encode(name))
              for prefix in ("", "a") for name in probe.names]
  length = max(len(h) + len(n) for h, n in captions)
  decoder_inputs = np.zeros((len(captions), length), np.int32)
  for c, (head, name) in enumerate(captions):
    y = head + name
    decoder_inputs[c, :len(y)] = [special_tokens.BOS_ID] + y[:-1]
  for row in range(2):
    image = {k: np.repeat(np.asarray(batch[k])[row:row + 1], len(captions), 0)
             for k in image_keys}
    logits = forward(params, {**image, "decoder_inputs": decoder_inputs})  # [2N, L, V]
    logp = np.asarray(jax.nn.log_softmax(logits.astype(np.float32), axis=-1))
    direct = np.array([sum(logp[c, t, (head + name)[t]]
                           for t in range(len(head), len(head) + len(name)))
                       for c, (head, name) in enumerate(captions)])
    best = direct.reshape(2, len(probe.names)).max(0)
    image_id = str(probe.examples[int(index[row])].image_id)
    np.testing.assert_allclose(scores[image_id], best, rtol=1e-4, atol=1e-4)


def test_probe_result_reports_every_pair_and_writes_ranks(world, tmp_path):
  config = _config(world)
  setup = RunSetup(config)
  params = state_lib.TrainSetup(setup, config.optim).new_state(0)["params"]
  probe = eval_registry.build(config, setup)["nocaps_val"]
  result = probe.run(params)
  with open(os.path.join(world, "nocaps_val", "concepts.json")) as f:
    shown = json.load(f)
  assert {i: set(r) for i, r in result.ranks.items()} == {i: set(c) for i, c in shown.items()}
  assert all(1 <= r <= 40 for per in result.ranks.values() for r in per.values())
  assert result.scores["overall"]["pairs"] == sum(len(c) for c in shown.values())
  assert {"in-domain/naming_R@1", "overall/naming_MRR"} <= set(result.metrics)
  assert set(result.metrics) - {k for k in result.metrics if k.startswith("skipped/")} <= \
      naming_probe.metric_names(config)
  paths = evaluator_lib.report(result, 0, str(tmp_path))
  with open(paths["ranks"]) as f:
    assert json.load(f) == result.ranks


def test_probe_names_an_unknown_concept(world):
  config = _config(world)
  config.synthetic.num_concepts = 30  # the inventory's first 30: nocaps shows others
  setup = RunSetup(config)
  with pytest.raises(KeyError, match="not among the 30 concepts"):
    eval_registry.build(config, setup)


def test_repeated_prefix_fails_config_validation(world):
  config = _config(world)
  config.eval.naming_prefixes = "a, a"
  with pytest.raises(config_rules.ConfigError, match="naming_prefixes"):
    config_rules.validate(config)
