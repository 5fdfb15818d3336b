"""Synthetic-size pre-training rows of Tables 11 and 12 (configs/ablation_pretrain.py).

  --config=configs/synthetic_ablation_pretrain.py:<row>   row = <objective>[,<rate>]

configs/synthetic_pretrain.py (the synthetic ic pre-training on cc12m) with
the row's objective. The ic+0.1*vlm row's text tower has 2 layers
(model.text_encoder_layers) and projects to 128, as the synthetic vlm model.
The moc row reads data/synthetic/cc12m/centroids.npy:
  python -m cc12m_jax.data.clusters --data_dir=data/synthetic --source=cc12m \
      --num_clusters=256 --sample_regions=50000
Fine-tuning: configs/synthetic_finetune.py with --config.train.init_partial=True.
"""
import ml_collections

from configs import ablation_pretrain, synthetic_pretrain


def get_config(row: str = "mlm,0.2") -> ml_collections.ConfigDict:
  config = synthetic_pretrain.get_config()
  config.model.text_encoder_layers = 2
  config.model.projection_dim = 128
  config.model.temperature = 0.1
  return ablation_pretrain.apply_row(config, row)
