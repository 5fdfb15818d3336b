r"""Feature-record datasets as TensorFlow Datasets builders.

A data_dir written by the importers (or the synthetic generator) holds one
directory of TFRecord shards per source. This builder turns the sources of
one dataset into a TFDS dataset with named splits, a feature spec, split
sizes and metadata, for people whose tooling expects TFDS:

    tfds build cc12m_feature_records/coco --imports=cc12m_jax.data.tfds_builder \
        --manual_dir=data/features --data_dir=~/tensorflow_datasets
    # the same without the tfds command (whose 4.9 CLI needs mlcroissant):
    python -m cc12m_jax.data.importers tfds --config=coco \
        --manual_dir=data/features --data_dir=~/tensorflow_datasets

    import cc12m_jax.data.tfds_builder  # registers the builder
    ds = tfds.load("cc12m_feature_records/coco", split="validation",
                   data_dir="~/tensorflow_datasets")

(`tfds.load(..., download_and_prepare_kwargs={"download_config":
tfds.download.DownloadConfig(manual_dir=...)})` builds on first use.)
Configs and their splits <- sources (sub-directories of the manual dir; a
split whose source is absent is left out, e.g. nocaps has no public test
captions):

  cc3m                train <- cc3m
  cc12m               train <- cc12m
  coco                train <- coco_train, validation <- coco_val
  nocaps              validation <- nocaps_val
  flickr30k           train, validation, test <- flickr_train, flickr_val, flickr_test
  locnar_coco         train <- locnar_coco_train, validation <- locnar_coco_val
  locnar_open_images  validation <- locnar_oi_val, test <- locnar_oi_test
  locnar_flickr30k    train, validation, test <- locnar_flickr_{train,val,test}

Features (decoded float32, whatever the records' storage dtype): image_id,
source, global_feature [D], region_features [N, D] (N <= 16), region_boxes
[N, 4] (normalized x1 y1 x2 y2), tags, tag_scores [M], captions, domain
(ClassLabel: none / in- / near- / out-domain, the batch contract's ids),
width, height. D varies between detectors, so it is left unknown in the spec
and recorded in `info.metadata["feature_dim"]` (per split: "sources").

The training pipeline does not read TFDS: cc12m_jax/data/pipeline.py reads
the record shards themselves (raw-byte features, batched parsing), several
times faster than per-example TFDS decoding.
"""
import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib

DOMAIN_NAMES = ("none", "in-domain", "near-domain", "out-domain")
SPLITS = {
    "cc3m": {"train": "cc3m"},
    "cc12m": {"train": "cc12m"},
    "coco": {"train": "coco_train", "validation": "coco_val"},
    "nocaps": {"validation": "nocaps_val"},
    "flickr30k": {"train": "flickr_train", "validation": "flickr_val",
                  "test": "flickr_test"},
    "locnar_coco": {"train": "locnar_coco_train",
                    "validation": "locnar_coco_val"},
    "locnar_open_images": {"validation": "locnar_oi_val",
                           "test": "locnar_oi_test"},
    "locnar_flickr30k": {"train": "locnar_flickr_train",
                         "validation": "locnar_flickr_val",
                         "test": "locnar_flickr_test"},
}


class FeatureRecordsConfig(tfds.core.BuilderConfig):
  """A dataset: its TFDS split names and the source directory of each."""

  def __init__(self, *, splits: dict[str, str], **kwargs):
    super().__init__(**kwargs)
    self.splits = dict(splits)


def _configs() -> list[FeatureRecordsConfig]:
  return [FeatureRecordsConfig(
      name=name, splits=splits,
      description=", ".join(f"{k} <- {v}" for k, v in splits.items()))
          for name, splits in SPLITS.items()]


class Cc12mFeatureRecords(tfds.core.GeneratorBasedBuilder):
  """Region features, tags and captions of images (cc12m_jax records)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Record format version 1 (docs/record_format.md)."}
  BUILDER_CONFIGS = _configs()
  MANUAL_DOWNLOAD_INSTRUCTIONS = """\
  The manual dir is a data_dir of feature records: import public files with
  `python -m cc12m_jax.data.importers <format> --output_dir=<manual_dir> ...`
  (docs/importers.md), or generate the synthetic world into it."""

  def _info(self) -> tfds.core.DatasetInfo:
    text = tfds.features.Text()
    floats = lambda shape, **kw: tfds.features.Tensor(
        shape=shape, dtype=np.float32, **kw)
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "image_id": text,
            "source": text,
            "global_feature": floats((None,)),
            # Two unknown dimensions need an encoding; raw bytes, since
            # detector features barely compress.
            "region_features": floats(
                (None, None), encoding=tfds.features.Encoding.BYTES),
            "region_boxes": floats((None, 4)),
            "tags": tfds.features.Sequence(tfds.features.Text()),
            "tag_scores": floats((None,)),
            "captions": tfds.features.Sequence(tfds.features.Text()),
            "domain": tfds.features.ClassLabel(names=DOMAIN_NAMES),
            "width": tfds.features.Scalar(dtype=np.int32),
            "height": tfds.features.Scalar(dtype=np.int32),
        }),
        metadata=tfds.core.MetadataDict(),
        homepage="https://github.com/google-research-datasets/conceptual-12m",
        citation="""@inproceedings{changpinyo2021cc12m,
  title = {{Conceptual 12M}: Pushing Web-Scale Image-Text Pre-Training To
           Recognize Long-Tail Visual Concepts},
  author = {Changpinyo, Soravit and Sharma, Piyush and Ding, Nan and
            Soricut, Radu},
  booktitle = {CVPR}, year = {2021}}""")

  def _split_generators(self, dl_manager):
    root = os.fspath(dl_manager.manual_dir)
    present = {split: source for split, source in self.builder_config.splits.items()
               if tf.io.gfile.exists(os.path.join(
                   metadata_lib.source_dir(root, source), metadata_lib.METADATA_FILE))}
    if not present:
      raise FileNotFoundError(
          f"{root}: none of the sources of {self.builder_config.name!r} "
          f"({', '.join(self.builder_config.splits.values())}) is there; "
          f"import them with python -m cc12m_jax.data.importers")
    dims = {metadata_lib.load_metadata(root, s).feature_dim for s in present.values()}
    if len(dims) > 1:
      raise ValueError(f"{root}: the sources {sorted(present.values())} have "
                       f"different feature dimensions {sorted(dims)}")
    self.info.metadata["feature_dim"] = dims.pop()
    self.info.metadata["sources"] = present
    return {split: self._generate_examples(root, source)
            for split, source in present.items()}

  def _generate_examples(self, root: str, source: str):
    for r in records_lib.read_source_records(root, source):
      yield r.image_id, {
          "image_id": r.image_id,
          "source": r.source,
          "global_feature": np.asarray(r.global_feature, np.float32),
          "region_features": np.asarray(r.region_features, np.float32),
          "region_boxes": np.asarray(r.region_boxes, np.float32),
          "tags": list(r.tags),
          "tag_scores": np.asarray(r.tag_scores, np.float32),
          "captions": list(r.captions),
          "domain": records_lib.DOMAIN_IDS[r.domain],
          "width": r.width,
          "height": r.height,
      }


NAME = "cc12m_feature_records"


def build(config: str, manual_dir: str, data_dir: str) -> tfds.core.DatasetBuilder:
  """Prepares `cc12m_feature_records/<config>` from the records in manual_dir."""
  builder = tfds.builder(f"{NAME}/{config}", data_dir=data_dir)
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
  return builder

