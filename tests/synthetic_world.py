"""A small synthetic world for end-to-end tests (the generator of the main job)."""
from cc12m_jax.data.synthetic import generate
from configs import base


def make_world(data_dir: str, **sizes) -> str:
  """Generates the synthetic world into `data_dir` with config.synthetic fields `sizes`.

  Every test that trains on the world sets its own sizes: how much signal a
  learning test needs differs from what a resume test needs.
  """
  cfg = base.get_config()
  sizes.setdefault("num_cc3m_dev", 8)  # only Table 7 reads it; keep it small by default
  # Val and test galleries of 1/6 of num_flickr each, not Flickr30K's 1,000 images.
  sixth = max(1, sizes.get("num_flickr", cfg.synthetic.num_flickr) // 6)
  sizes.setdefault("num_flickr_val", sixth)
  sizes.setdefault("num_flickr_test", sixth)
  for key, value in sizes.items():
    cfg.synthetic[key] = value  # locked config: a misspelt size is an error
  generate.generate(cfg, data_dir, log=lambda _: None)
  return data_dir
