"""The Localized Narratives configs (paper Tables 6 and 8) load, pass the
config rules, and differ from their COCO / Flickr bases only where LocNar
differs."""
import pytest

from cc12m_jax import config_rules
from configs import (coco_finetune, locnar_coco_finetune, locnar_flickr_finetune,
                     locnar_flickr_zero_shot, vlm_flickr_finetune, vlm_zero_shot)


def _differences(a, b) -> dict:
  a, b = a.to_dict(), b.to_dict()
  return {f"{s}.{k}": b[s][k] for s in a for k in a[s]
          if isinstance(a[s], dict) and a[s][k] != b[s][k]}


@pytest.mark.parametrize("module, base, expected", [
    (locnar_coco_finetune, coco_finetune, {
        "data.train_sources": "locnar_coco_train",
        "data.eval_sources": "locnar_coco_val,locnar_oi_val",
        "data.max_caption_length": 180, "decode.max_decode_len": 180,
        "eval.selection_metric": "locnar_coco_val/overall/CIDEr"}),
    (locnar_flickr_finetune, vlm_flickr_finetune, {
        "data.train_sources": "locnar_flickr_train",
        "data.eval_sources": "locnar_flickr_val,locnar_flickr_test",
        "data.max_caption_length": 180, "eval.references": "",
        "eval.selection_metric": "locnar_flickr_val/image_retrieval/R@1"}),
    (locnar_flickr_zero_shot, vlm_zero_shot, {
        "data.train_sources": "locnar_flickr_test", "data.eval_sources": "locnar_flickr_test",
        "data.max_caption_length": 180, "eval.references": ""}),
])
def test_locnar_config_differs_only_in_data_and_length(module, base, expected):
  config = module.get_config()
  diff = _differences(base.get_config(), config)
  assert set(diff) <= set(expected)       # nothing else changed
  for key, value in expected.items():     # (a base may already agree on some)
    section, name = key.split(".")
    assert config[section][name] == value, key
  if config.mode == "finetune":
    config.train.init_from = "/pretrained"  # a command-line flag in real runs
  config_rules.validate(config, num_devices=8)
