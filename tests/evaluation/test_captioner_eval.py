"""CaptionEvaluator on real records + EvalIterator + SubwordTokenizer, and
the best-checkpoint tracker."""
import json

import jax
import ml_collections
import numpy as np
import pytest

from configs import base
from cc12m_jax import config_rules, main
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import eval_pipeline, pipeline, records as records_lib
from cc12m_jax.data.text import special_tokens
from cc12m_jax.decoding import captioner_decode
from cc12m_jax.evaluation import captioner_eval, nocaps, ptb_tokenizer
from cc12m_jax.evaluation import registry as eval_registry
from cc12m_jax.evaluation import report as report_lib
from cc12m_jax.core import checkpointing
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.core.selection import BestCheckpointTracker
from cc12m_jax.models import captioner as captioner_lib
from cc12m_jax.train import state as state_lib
from cc12m_jax.train.trainer import PeriodicEvaluation

WORDS = ["a", "dog", "cat", "on", "the", "grass", "tortoise", "sand", "red",
         "bus", "##s", "violin", "table"]
DOMAINS = ["in-domain", "in-domain", "in-domain", "near-domain",
           "near-domain", "out-domain", "out-domain"]
D = 8


def write_world(data_dir: str) -> None:
  rng = np.random.RandomState(0)
  records = []
  for i, domain in enumerate(DOMAINS):
    n = 3
    boxes = np.sort(rng.rand(n, 4), -1).astype(np.float32)
    records.append(records_lib.FeatureRecord(
        image_id=f"img{i}", source="nocaps_val",
        global_feature=rng.normal(size=D).astype(np.float32),
        region_features=rng.normal(size=(n, D)).astype(np.float32),
        region_boxes=boxes, tags=["dog", "grass"],
        tag_scores=np.array([0.9, 0.5], np.float32),
        captions=[f"a dog on the grass {i}", "a red bus", "a cat on sand"],
        width=640, height=480, domain=domain))
  records_lib.write_records(
      metadata_lib.shard_prefix(data_dir, "nocaps_val"), records, 2)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="nocaps_val", feature_dim=D, num_records=len(records),
      num_captions=3 * len(records), num_shards=2))
  with open(f"{data_dir}/vocab.txt", "w") as f:
    f.write("\n".join(list(special_tokens.RESERVED_TOKENS) + WORDS) + "\n")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("world"))
  write_world(data_dir)
  config = base.get_config()
  config.data.data_dir = data_dir
  config.data.eval_global_batch_size = 4
  config.data.max_caption_length = 8
  config.data.max_tag_tokens = 2
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("data",))
  sharding = jax.sharding.NamedSharding(mesh,
                                        jax.sharding.PartitionSpec("data"))
  iterator = eval_pipeline.make_eval_iterator(config.data, "nocaps_val", sharding)
  m = base.model_config()
  m.emb_dim, m.num_heads, m.mlp_dim = 16, 2, 32
  m.num_encoder_layers = m.num_decoder_layers = 1
  model = captioner_lib.Captioner(m, iterator.tokenizer.vocab_size)
  init_batch = next(iterator.host_batches())
  params = jax.jit(lambda r, b: model.init(r, b, train=False))(
      jax.random.key(0), {k: init_batch[k] for k in pipeline.DEVICE_KEYS}
  )["params"]
  decode_cfg = base.decode_config()
  decode_cfg.beam_size, decode_cfg.max_decode_len = 2, 5
  return model, params, iterator, decode_cfg


def test_every_example_decoded_once_and_detokenized(setup):
  model, params, iterator, decode_cfg = setup
  fn = captioner_decode.make_decode_fn(model, decode_cfg)
  predictions = captioner_eval.decode_eval_set(
      fn, params, iterator, iterator.examples, iterator.tokenizer)
  assert sorted(predictions) == sorted(f"img{i}" for i in range(7))
  # Same captions when decoding the host batches without sharding.
  expected = {}
  for batch in iterator.host_batches():
    out = fn(params, {k: batch[k] for k in pipeline.DEVICE_KEYS},
             jax.random.key(0))
    captions = captioner_decode.best_captions(out, iterator.tokenizer)
    for row, idx in enumerate(batch["example_index"]):
      if batch["example_mask"][row]:
        expected[iterator.examples[idx].image_id] = captions[row]
  assert predictions == expected


def _eval_config(data_dir: str) -> ml_collections.ConfigDict:
  """A one-layer width-16 captioner evaluating nocaps_val on a 4-device mesh."""
  config = base.get_config()
  config.data.data_dir = data_dir
  config.data.train_sources = "nocaps_val"  # only read for the feature dimension
  config.data.global_batch_size = config.data.eval_global_batch_size = 4
  config.data.max_caption_length, config.data.max_tag_tokens = 8, 2
  config.model.emb_dim, config.model.num_heads, config.model.mlp_dim = 16, 2, 32
  config.model.num_encoder_layers = config.model.num_decoder_layers = 1
  config.model.feature_dim, config.model.vocab_size = D, 6 + len(WORDS)
  config.decode.beam_size, config.decode.max_decode_len = 2, 4
  config.eval.metrics = "CIDEr,ROUGE-L"
  config.mesh.data = 4
  return config


def test_evaluator_rejects_references_missing_eval_images(setup, tmp_path):
  _, _, iterator, _ = setup
  config = _eval_config(iterator._data_cfg.data_dir)
  partial = tmp_path / "partial.json"
  partial.write_text(json.dumps({"images": [{"id": "img0", "domain": "in-domain"}],
                                 "annotations": [{"image_id": "img0", "caption": "a dog"}]}))
  config.eval.references = str(partial)
  with pytest.raises(KeyError, match="img1"):
    captioner_eval.CaptionEvaluator(config, RunSetup(config, jax.devices()[:4]), "nocaps_val")


def test_tracker_keeps_best_and_survives_restart(tmp_path):
  tracker = BestCheckpointTracker(str(tmp_path), "out-domain/CIDEr")
  assert tracker.update(100, {"out-domain/CIDEr": 0.3, "in-domain/CIDEr": 0.5})
  assert not tracker.update(200, {"out-domain/CIDEr": 0.2,
                                  "in-domain/CIDEr": 0.9})
  assert tracker.update(300, {"out-domain/CIDEr": 0.4, "in-domain/CIDEr": 0.8})
  again = BestCheckpointTracker(str(tmp_path), "out-domain/CIDEr")
  assert (again.best_step, again.best_value) == (300, 0.4)
  assert [h["in-domain/CIDEr"] for h in again.history] == [0.5, 0.9, 0.8]
  assert not again.update(400, {"out-domain/CIDEr": float("nan")})
  with pytest.raises(KeyError, match="out-domain/CIDEr"):
    again.update(500, {"overall/CIDEr": 1.0})
  with pytest.raises(ValueError, match="tracks"):
    BestCheckpointTracker(str(tmp_path), "overall/CIDEr")
  low = BestCheckpointTracker(str(tmp_path / "min"), "overall/loss", "min")
  assert low.update(1, {"overall/loss": 2.0})
  assert low.update(2, {"overall/loss": 1.0})
  assert json.loads((tmp_path / "min" / "best.json").read_text())[
      "best_step"] == 2


def test_tracker_saves_params_in_trainer_checkpoint_layout(tmp_path):
  import orbax.checkpoint as ocp
  STATE_ITEM = checkpointing.STATE_ITEM
  params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
            "b": np.ones(3, np.float32)}
  tracker = BestCheckpointTracker(str(tmp_path), "overall/CIDEr")
  tracker.save_params(7, params)
  tracker.save_params(9, jax.tree_util.tree_map(lambda x: x * 2, params))
  manager = ocp.CheckpointManager(tmp_path / "checkpoints",
                                  item_names=(STATE_ITEM,))
  assert manager.all_steps() == [9]  # only the best is kept
  restored = manager.restore(9, args=ocp.args.Composite(**{
      STATE_ITEM: ocp.args.PyTreeRestore()}))[STATE_ITEM]
  np.testing.assert_array_equal(np.asarray(restored["params"]["w"]),
                                params["w"] * 2)
  # ... so config.train.init_from=<directory> loads it.
  abstract = jax.tree_util.tree_map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
  one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  loaded, step = checkpointing.load_pretrained_params(
      str(tmp_path), -1, abstract, jax.tree_util.tree_map(lambda _: one,
                                                          params))
  assert step == 9
  np.testing.assert_array_equal(np.asarray(loaded["b"]), params["b"] * 2)


@pytest.mark.skipif(ptb_tokenizer.java_unavailable_reason() is not None,
                    reason="PTB tokenization and METEOR need Java (launch/install.sh installs it)")
def test_periodic_eval_logs_curves_and_keeps_best(setup, tmp_path):
  # The trainer's hook, with the evaluators of evaluation/registry.py, the
  # reporting of core/evaluator.py and BestCheckpointTracker.
  _, _, iterator, _ = setup
  config = _eval_config(iterator._data_cfg.data_dir)
  run_setup = RunSetup(config, jax.devices()[:4])
  params = state_lib.TrainSetup(run_setup, config.optim).new_state(0)["params"]
  written = []

  class Writer:
    def write_scalars(self, step, scalars):
      written.append((step, dict(scalars)))

  hook = PeriodicEvaluation(config, eval_registry.build(config, run_setup), str(tmp_path),
                            Writer())
  hook(2, params)
  best = json.loads((tmp_path / "best" / "best.json").read_text())
  flat = best["history"][-1]
  assert {"in-domain/CIDEr", "out-domain/CIDEr", "nocaps_val/near-domain/CIDEr",
          "overall/ROUGE-L"} <= set(flat)
  step, scalars = written[0]
  assert step == 2 and "eval/nocaps_val/out-domain/CIDEr" in scalars
  assert best["best_step"] == 2
  assert best["best_value"] == flat["out-domain/CIDEr"]
  assert (tmp_path / "best" / "checkpoints" / "2").exists()
  report = json.loads((tmp_path / "eval" / "nocaps_val" / "step_2" /
                       "report.json").read_text())
  # Domains come from the records; scores equal a direct protocol run.
  assert report["num_images"] == {"in-domain": 3, "near-domain": 2,
                                  "out-domain": 2, "overall": 7}
  predictions = report_lib.read_predictions(
      str(tmp_path / "eval" / "nocaps_val" / "step_2" / "predictions.json"))
  references = nocaps.references_from_examples(iterator.examples)
  direct = nocaps.evaluate(predictions, references,
                           metrics=("CIDEr", "ROUGE-L"))
  assert direct["scores"] == report["scores"]


@pytest.mark.skipif(ptb_tokenizer.java_unavailable_reason() is not None,
                    reason="PTB tokenization and METEOR need Java (launch/install.sh installs it)")
def test_evaluate_mode_against_a_karpathy_coco_split(setup, tmp_path):
  """main's evaluate mode scores a checkpoint against Karpathy's COCO JSON layout.

  Records name images as the Karpathy file name without its extension, so
  'img3.jpg' in the JSON is record 'img3'; the source 'nocaps_val' reads the
  JSON's 'val' split.
  """
  _, _, iterator, _ = setup
  config = _eval_config(iterator._data_cfg.data_dir)
  images = [{"filename": f"img{i}.jpg", "cocoid": i, "split": "val",
             "sentences": [{"raw": f"a dog on the grass {i}", "tokens": []},
                           {"raw": "a red bus", "tokens": []}]} for i in range(len(DOMAINS))]
  images.append({"filename": "img99.jpg", "cocoid": 99, "split": "train",
                 "sentences": [{"raw": "a cat", "tokens": []}]})
  references = tmp_path / "dataset_coco.json"
  references.write_text(json.dumps({"dataset": "coco", "images": images}))

  config.mesh.data = -1  # main.run uses every device
  config.data.global_batch_size = config.data.eval_global_batch_size = 8
  run_setup = RunSetup(config)
  params = state_lib.TrainSetup(run_setup, config.optim).new_state(0)["params"]
  checkpoints = checkpointing.Checkpointer(str(tmp_path / "trained"), keep=1, use_async=False)
  checkpoints.save(5, {"params": params}, train_iter=None)
  checkpoints.close()

  config.mode = "evaluate"
  config.eval.references = str(references)
  config.eval.checkpoint_dir = str(tmp_path / "trained")
  config.eval.num_examples_to_show = 0
  config_rules.validate(config)
  workdir = tmp_path / "evaluate"
  metrics = main.run(config, str(workdir))["nocaps_val"]

  out = workdir / "eval" / "nocaps_val" / "step_5"
  predictions = report_lib.read_predictions(str(out / "predictions.json"))
  assert sorted(predictions) == sorted(f"img{i}" for i in range(len(DOMAINS)))
  report = json.loads((out / "report.json").read_text())
  assert report["num_images"]["overall"] == len(DOMAINS)
  direct = nocaps.evaluate(predictions, nocaps.load_references(str(references), "val"),
                           metrics=("CIDEr", "ROUGE-L"))
  assert direct["scores"] == report["scores"]
  assert metrics["overall/CIDEr"] == report["scores"]["overall"]["CIDEr"]
