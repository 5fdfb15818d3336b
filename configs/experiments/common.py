"""Stages shared by the experiment suites, at synthetic size and at paper size.

Each builder returns one stage of a suite (cc12m_jax/experiments/suite.py)
for a size: the same stage, at the other size, only changes its config file
and step counts. Suites build their conditions from these, so a stage that
two suites share (e.g. CC12M pre-training) is the same command in both and
runs once when the suites share a workdir.

Stage names say what runs: ic_/vlm_ + pretrain, zero_shot (the pre-trained
model as is), finetune, evaluate (with step selection on the suite's
selection source unless said otherwise), train (from scratch on the
downstream data).

Synthetic sizes follow configs/synthetic_*.py and configs/vlm_synthetic_*.py;
paper sizes configs/cc3m.py, cc12m.py, cc3m_cc12m.py, coco_finetune.py and
configs/vlm_*.py.
"""
import ml_collections

from configs import base
from configs import synthetic_finetune
from configs import synthetic_pretrain
from configs import vlm_flickr_finetune
from configs import vlm_synthetic_finetune

ConfigDict = ml_collections.ConfigDict
SIZES = ("synthetic", "paper")
DATA_DIRS = {"synthetic": "data/synthetic", "paper": "data/features"}
# Only CIDEr is tabulated; METEOR's Java start-up and SPICE are left to the
# paper-size runs.
SYNTHETIC_METRICS = "CIDEr,BLEU-4,ROUGE-L"
FLICKR_REFERENCES = "{data_dir}/flickr/dataset_flickr30k.json"

_PAPER_IC_PRETRAIN = {"cc3m": "configs/cc3m.py", "cc12m": "configs/cc12m.py",
                      "cc3m,cc12m": "configs/cc3m_cc12m.py"}
_PAPER_VLM_PRETRAIN = {"cc3m": "configs/vlm_cc3m.py", "cc12m": "configs/vlm_cc12m.py",
                       "cc3m,cc12m": "configs/vlm_cc3m_cc12m.py"}


def check_size(size: str) -> str:
  size = size or "synthetic"
  if size not in SIZES:
    raise ValueError(f"suite size {size!r}: choose one of {SIZES} (file.py:<size>)")
  return size


def suite(name: str, title: str, size: str, *, report_source: str, selection_source: str,
          selection_metric: str, paper_table: str = "") -> ConfigDict:
  c = ml_collections.ConfigDict()
  c.name = name
  c.title = f"{title} ({size} size)"
  c.size = size
  c.paper_table = paper_table or name
  c.data_dir = DATA_DIRS[size]
  c.selection_source = selection_source
  c.report_source = report_source
  c.selection_metric = selection_metric
  c.bootstrap = ml_collections.ConfigDict({"samples": 1000, "seed": 0, "confidence": 0.95})
  c.conditions = ml_collections.ConfigDict()
  c.rows = []
  c.columns = []
  c.claims = []
  return c


def stage(config: str, mode: str, *, init_from: str = "", checkpoint_dir: str = "",
          sources: str = "", select: bool = False, checkpoint_step: int = -1,
          **sections) -> ConfigDict:
  """One stage; keyword sections are config overrides, e.g. train={'num_train_steps': 10}."""
  return ml_collections.ConfigDict({
      "config": config, "mode": mode, "init_from": init_from,
      "checkpoint_dir": checkpoint_dir, "sources": sources, "select": select,
      "checkpoint_step": checkpoint_step, "overrides": dict(sections)})


def row(key: str, label: str, condition: str, stage_name: str, paper_row: str = "") -> ConfigDict:
  return ml_collections.ConfigDict({"key": key, "label": label, "condition": condition,
                                    "stage": stage_name, "paper_row": paper_row or key})


def column(key: str, label: str, source: str, metric: str, scale: float,
           stage_name: str = "") -> ConfigDict:
  return ml_collections.ConfigDict({"key": key, "label": label, "source": source,
                                    "metric": metric, "scale": scale, "stage": stage_name})


def chain(text: str, column_key: str, chain_text: str) -> ConfigDict:
  return ml_collections.ConfigDict({"text": text, "column": column_key, "chain": chain_text})


def gain(text: str, low: str, high: str, larger: str, smaller: str) -> ConfigDict:
  return ml_collections.ConfigDict({"text": text, "low": low, "high": high,
                                    "larger": larger, "smaller": smaller})


def _mixture(sources: str, fraction: float) -> dict:
  """Training mixture of pre-training sources; CC3M's images leave CC12M."""
  names = sources.split(",")
  syn = base.get_config().synthetic
  pairs = {"cc3m": syn.num_cc3m, "cc12m": syn.num_cc12m}
  # Mixed in proportion to size, as configs/cc3m_cc12m.py does at paper size.
  weights = ",".join(f"{pairs.get(n, 1) / sum(pairs.get(m, 1) for m in names):.4f}"
                     for n in names)
  return {"train_sources": sources, "train_weights": weights,
          "train_fractions": ",".join(str(fraction) for _ in names),
          "exclude_ids_of": "cc3m" if "cc12m" in names else ""}


# ------------------------------------------------------------------ ic --

def ic_pretrain(size: str, sources: str, fraction: float = 1.0) -> ConfigDict:
  if size == "synthetic":
    return stage("configs/synthetic_pretrain.py", "pretrain", data=_mixture(sources, fraction))
  data = {"train_fractions": ",".join(str(fraction) for _ in sources.split(","))}
  return stage(_PAPER_IC_PRETRAIN[sources], "pretrain", data=data)


def ic_train(size: str, source: str = "coco_train") -> ConfigDict:
  """From scratch on the downstream data, checkpoints kept for step selection.

  The paper gives no schedule for its from-scratch model; at paper size this
  is the COCO fine-tuning schedule at the pre-training learning rate
  (3.2e-4), 10K steps.
  """
  if size == "synthetic":
    return stage("configs/synthetic_pretrain.py", "pretrain",
                 data={"train_sources": source, "train_weights": "1.0", "train_fractions": "1.0",
                       "exclude_ids_of": ""},
                 train={"checkpoint_every_steps": 100,
                        "keep_checkpoints": synthetic_pretrain.NUM_TRAIN_STEPS // 100})
  return stage("configs/coco_finetune.py:3.2e-4,10000", "pretrain",
               data={"train_sources": source}, train={"keep_checkpoints": 10})


def ic_as_is(size: str, of: str = "ic_pretrain", sources: str = "{report_source}",
             config: str = "") -> ConfigDict:
  """The latest checkpoint of `of`, evaluated as is (zero-shot); `config`: the
  config that builds its model (default: the ic pre-training one)."""
  if size == "synthetic":
    return stage(config or "configs/synthetic_pretrain.py", "evaluate", checkpoint_dir=of,
                 sources=sources, eval={"metrics": SYNTHETIC_METRICS})
  return stage(config or "configs/cc12m.py", "evaluate", checkpoint_dir=of, sources=sources)


# Where the synthetic captions name an object: a CC12M-style alt-text at its start
# or after "<PERSON> with a", a CC3M-style caption after "a" or "actor posing with
# a". A model learns a name at the positions its captions put it, so a probe that
# compares the two styles scores every name at all four, the best counting (a
# probe at one style's positions under-reads the other's model: docs/results.md,
# *Pilot: Table 9's ratios at 7-8x its densities*). Each prefix adds one probe's
# worth of time.
PROBE_PREFIXES = ",a,<PERSON> with a,actor posing with a"


def ic_probe(of: str = "ic_pretrain", sources: str = "{report_source}",
             config: str = "configs/synthetic_pretrain.py") -> ConfigDict:
  """The naming probe (evaluation/naming_probe.py) on the latest checkpoint of `of`:
  does the model know each shown concept's name, whatever it decodes. Synthetic
  size only: it needs the concepts.json that the synthetic world writes."""
  return stage(config, "evaluate", checkpoint_dir=of, sources=sources,
               eval={"evaluator": "naming", "naming_prefixes": PROBE_PREFIXES})


def ic_finetune(size: str, of: str = "ic_pretrain", source: str = "coco_train",
                steps: int = 0, checkpoint_every: int = 0) -> ConfigDict:
  """COCO-style fine-tuning that keeps every checkpoint for step selection.

  The budget is the longest of the finetune_grid suite's (docs/results.md):
  the step is chosen on coco_val among every kept one, so a longer budget
  only adds candidates. The paper's own 5K steps at paper size.
  """
  steps = steps or (synthetic_finetune.NUM_TRAIN_STEPS if size == "synthetic" else 5_000)
  every = checkpoint_every or (50 if size == "synthetic" else 1_000)
  train = {"num_train_steps": steps, "checkpoint_every_steps": every,
           "keep_checkpoints": steps // every}
  config = "configs/synthetic_finetune.py" if size == "synthetic" else "configs/coco_finetune.py"
  return stage(config, "finetune", init_from=of, data={"train_sources": source}, train=train)


def ic_evaluate(size: str, of: str = "ic_finetune", sources: str = "{report_source}",
                select: bool = True, checkpoint_step: int = -1,
                max_step: int = 0) -> ConfigDict:
  """Evaluation of `of`; with `select`, its step chosen among those up to `max_step` (0: all)."""
  cap = {"selection_max_step": max_step} if max_step else {}
  if size == "synthetic":
    return stage("configs/synthetic_finetune.py", "evaluate", checkpoint_dir=of, sources=sources,
                 select=select, checkpoint_step=checkpoint_step,
                 eval={"metrics": SYNTHETIC_METRICS, **cap})
  return stage("configs/coco_finetune.py", "evaluate", checkpoint_dir=of, sources=sources,
               select=select, checkpoint_step=checkpoint_step, **({"eval": cap} if cap else {}))


# ----------------------------------------------------------------- vlm --

def vlm_pretrain(size: str, sources: str, fraction: float = 1.0) -> ConfigDict:
  refs = {"references": FLICKR_REFERENCES}
  if size == "synthetic":
    return stage("configs/vlm_synthetic_pretrain.py", "pretrain",
                 data=_mixture(sources, fraction), eval=refs)
  data = {"train_fractions": ",".join(str(fraction) for _ in sources.split(","))}
  return stage(_PAPER_VLM_PRETRAIN[sources], "pretrain", data=data, eval=refs)


def vlm_train(size: str, source: str = "flickr_train") -> ConfigDict:
  """From scratch on Flickr train (the paper's from-scratch row): the Flickr
  fine-tuning schedule (steps and kept checkpoints, so the step is chosen on
  flickr_val among as many) at the pre-training learning rate."""
  refs = {"references": FLICKR_REFERENCES}
  if size == "synthetic":
    schedule = vlm_synthetic_finetune.get_config().train
    return stage("configs/vlm_synthetic_pretrain.py", "pretrain",
                 data={"train_sources": source, "train_weights": "1.0", "train_fractions": "1.0",
                       "exclude_ids_of": ""},
                 train={"num_train_steps": schedule.num_train_steps,
                        "checkpoint_every_steps": schedule.checkpoint_every_steps,
                        "keep_checkpoints": schedule.keep_checkpoints}, eval=refs)
  return stage("configs/vlm_flickr_finetune.py:3.2e-4", "pretrain", eval=refs)


def vlm_as_is(size: str, of: str = "vlm_pretrain", sources: str = "flickr_test") -> ConfigDict:
  refs = {"references": FLICKR_REFERENCES}
  if size == "synthetic":
    return stage("configs/vlm_synthetic_pretrain.py", "evaluate", checkpoint_dir=of,
                 sources=sources, eval=refs)
  return stage("configs/vlm_zero_shot.py", "evaluate", checkpoint_dir=of, sources=sources,
               eval=refs)


# The Flickr fine-tuning recipe at each size: its config file and the module
# that builds it (for its budget and checkpoint interval).
VLM_FINETUNE = {"synthetic": ("configs/vlm_synthetic_finetune.py", vlm_synthetic_finetune),
                "paper": ("configs/vlm_flickr_finetune.py", vlm_flickr_finetune)}


def vlm_finetune_steps(size: str) -> int:
  """The Flickr fine-tuning recipe's budget at `size`."""
  return VLM_FINETUNE[size][1].get_config().train.num_train_steps


def vlm_finetune(size: str, of: str = "vlm_pretrain", steps: int = 0) -> ConfigDict:
  """Flickr fine-tuning; `steps` replaces the recipe's budget, every checkpoint at the
  recipe's interval kept for step selection."""
  config, recipe = VLM_FINETUNE[size]
  sections = {}
  if steps:
    every = recipe.get_config().train.checkpoint_every_steps
    sections["train"] = {"num_train_steps": steps, "keep_checkpoints": steps // every}
  return stage(config, "finetune", init_from=of, eval={"references": FLICKR_REFERENCES},
               **sections)


def vlm_evaluate(size: str, of: str = "vlm_finetune", sources: str = "{report_source}",
                 select: bool = True, max_step: int = 0) -> ConfigDict:
  """Evaluation of `of`; with `select`, its step chosen among those up to `max_step` (0: all)."""
  cap = {"selection_max_step": max_step} if max_step else {}
  return stage(VLM_FINETUNE[size][0], "evaluate", checkpoint_dir=of, sources=sources, select=select,
               eval={"references": FLICKR_REFERENCES, **cap})
