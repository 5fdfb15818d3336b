r"""The synthetic world written in the public formats the importers read.

    python -m cc12m_jax.data.synthetic.export --world_dir=data/synthetic \
        --output_dir=data/synthetic_public

Reads a generated world's records (cc12m_jax.data.synthetic.generate) and
writes the same images as a team with real data would hold them:

  features/<source>.tsv            bottom-up TSV (EXPORT_FIELDS: the six
                                   standard columns plus global_feature;
                                   boxes in pixels)
  tags/<source>.jsonl              {"image_id", "tags": [{"name", "score"}]}
  captions/cc3m.tsv, cc3m_dev.tsv  caption<TAB>url (CC3M's column order)
  captions/cc12m.tsv               url<TAB>caption (CC12M's)
  captions/<coco source>.json      COCO captions JSON (width, height)
  captions/nocaps_val.json         nocaps JSON (COCO layout + domain)
  captions/dataset_flickr30k.json  Flickr30K Karpathy JSON (all three splits)
  localized_narratives/<source>.jsonl   Localized Narratives, one narrative
                                   per caption (COCO, nocaps = Open Images,
                                   Flickr sources)

Web images have no ids, only URLs: a CC record of generator id X gets the URL
url_of(X) and, imported, the id url_image_id(url_of(X)); `exported_id` gives
that mapping, and the features of CC sources are written under it (as a team
naming its feature files by the URL-derived id would). A CC12M record that
re-uses a CC3M image has the same URL, hence the same id, in both.

Importing these files back gives the generator's records (boxes equal to
float32 rounding of the pixel round trip); tests/data/importers checks it.
"""
import base64
import io
import json
import os
from typing import Iterable, Sequence

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import bottomup
from cc12m_jax.data.importers import image_ids
from cc12m_jax.data.synthetic import generate as generate_lib

# CC3M and CC12M ship as TSV (CC3M: caption, url; its dev split likewise).
WEB_SOURCES = ("cc3m", "cc12m", "cc3m_dev")
COCO_SOURCES = ("coco_train", "coco_val")
FLICKR_SOURCES = ("flickr_train", "flickr_val", "flickr_test")
LOCNAR_SOURCES = COCO_SOURCES + ("nocaps_val",) + FLICKR_SOURCES
EXPORT_FIELDS = bottomup.LAYOUTS["bottomup"] + ("global_feature",)
URL_PREFIX = "https://synthetic.example/images/"
_LOCNAR_DATASET = {"coco_train": "mscoco_train2017", "coco_val": "mscoco_val2017",
                   "nocaps_val": "open_images_validation"}


def url_of(image_id: str) -> str:
  return f"{URL_PREFIX}{image_id}.jpg"


def exported_id(source: str, image_id: str) -> str:
  """The id an exported record has once imported (URL-derived for web data)."""
  if source in WEB_SOURCES:
    return image_ids.url_image_id(url_of(image_id))
  return image_id


def _b64(array: np.ndarray, dtype: str = "<f4") -> bytes:
  return base64.b64encode(np.ascontiguousarray(array, dtype=dtype).tobytes())


def _pixel_boxes(record: records_lib.FeatureRecord) -> np.ndarray:
  scale = np.array([record.width, record.height] * 2, np.float64)
  return (np.asarray(record.region_boxes, np.float64) * scale).astype(np.float32)


def tsv_line(record: records_lib.FeatureRecord, layout: str,
             image_id: str = "") -> bytes:
  """One image in a TSV layout: 'bottomup' (EXPORT_FIELDS, global feature
  included), 'bottomup6' (the six standard columns: the global feature is
  lost, the importer takes the regions' mean), 'lxmert' (plus ids and
  confidences, descending in region order, and a global_feature column) or
  'vinvl' (features of D + 6 with normalized geometry; no size, no global)."""
  image_id = image_id or record.image_id
  n = len(record.region_features)
  values = {
      "image_id": image_id.encode(), "image_w": str(record.width).encode(),
      "image_h": str(record.height).encode(), "num_boxes": str(n).encode(),
      "boxes": _b64(_pixel_boxes(record)),
      "features": _b64(record.region_features),
      "global_feature": _b64(record.global_feature),
      "objects_id": _b64(np.arange(n), "<i8"),
      "objects_conf": _b64(1.0 - 0.01 * np.arange(n)),
      "attrs_id": _b64(np.zeros(n), "<i8"), "attrs_conf": _b64(np.zeros(n)),
  }
  if layout == "vinvl":
    boxes = np.asarray(record.region_boxes, np.float32)
    geometry = np.concatenate(
        [boxes, boxes[:, 2:3] - boxes[:, 0:1], boxes[:, 3:4] - boxes[:, 1:2]], 1)
    features = np.concatenate([record.region_features, geometry], 1)
    obj = {"num_boxes": n, "features": _b64(features).decode()}
    return b"\t".join([image_id.encode(), json.dumps(obj).encode()])
  fields = {"bottomup": EXPORT_FIELDS, "bottomup6": bottomup.LAYOUTS["bottomup"],
            "lxmert": bottomup.LAYOUTS["lxmert"] + ("global_feature",)}[layout]
  aliases = {"img_id": "image_id", "img_w": "image_w", "img_h": "image_h"}
  return b"\t".join(values[aliases.get(f, f)] for f in fields)


def lxmert_fields() -> str:
  """--tsv_fields of the 'lxmert' export layout."""
  return ",".join(bottomup.LAYOUTS["lxmert"] + ("global_feature",))


def write_tsv(records: Iterable[records_lib.FeatureRecord], path: str,
              layout: str = "bottomup", source: str = "") -> str:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "wb") as f:
    for r in records:
      f.write(tsv_line(r, layout, exported_id(source, r.image_id)) + b"\n")
  return path


def write_npz_dir(records: Iterable[records_lib.FeatureRecord], directory: str,
                  source: str = "") -> str:
  """One .npz an image, named by its id, with the default npz key names."""
  tf.io.gfile.makedirs(directory)
  for r in records:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.asarray(r.region_features, np.float32),
             bbox=_pixel_boxes(r), image_w=np.int64(r.width),
             image_h=np.int64(r.height),
             global_feature=np.asarray(r.global_feature, np.float32))
    name = exported_id(source, r.image_id) + ".npz"
    with tf.io.gfile.GFile(os.path.join(directory, name), "wb") as f:
      f.write(buffer.getvalue())
  return directory


def _write_lines(path: str, lines: Iterable[str]) -> str:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    for line in lines:
      f.write(line + "\n")
  return path


def _write_json(path: str, obj) -> str:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(obj, sort_keys=True) + "\n")
  return path


def tags_lines(records: Sequence[records_lib.FeatureRecord], source: str):
  for r in records:
    tags = [{"name": t, "score": float(s)} for t, s in zip(r.tags, r.tag_scores)]
    yield json.dumps({"image_id": exported_id(source, r.image_id), "tags": tags})


def cc_lines(records: Sequence[records_lib.FeatureRecord], source: str):
  for r in records:
    url, caption = url_of(r.image_id), r.captions[0]
    yield f"{caption}\t{url}" if source.startswith("cc3m") else f"{url}\t{caption}"


def coco_json(records: Sequence[records_lib.FeatureRecord],
              with_domain: bool) -> dict:
  """COCO captions layout; ids are the generator's (strings: real COCO's are
  ints, which the importer reads as their decimal string)."""
  images, annotations = [], []
  for r in records:
    image = {"id": r.image_id, "file_name": f"{r.image_id}.jpg",
             "width": r.width, "height": r.height}
    if with_domain:
      image["domain"] = r.domain
    images.append(image)
    annotations += [{"id": len(annotations) + k, "image_id": r.image_id,
                     "caption": c} for k, c in enumerate(r.captions)]
  return {"info": {"description": "cc12m_jax synthetic world"}, "licenses": [],
          "images": images, "annotations": annotations}


def karpathy_json(splits: dict[str, Sequence[records_lib.FeatureRecord]]) -> dict:
  images, sentence_id = [], 0
  for split, records in splits.items():
    for r in records:
      sentences = []
      for c in r.captions:
        sentences.append({"raw": c, "imgid": len(images), "sentid": sentence_id,
                          "tokens": c.split()})
        sentence_id += 1
      images.append({"filename": f"{r.image_id}.jpg", "imgid": len(images),
                     "split": split, "sentences": sentences,
                     "sentids": [s["sentid"] for s in sentences]})
  return {"dataset": "flickr30k", "images": images}


def locnar_lines(records: Sequence[records_lib.FeatureRecord], source: str):
  dataset = _LOCNAR_DATASET.get(source, "flickr30k_" + source.split("_")[-1])
  for r in records:
    for annotator, caption in enumerate(r.captions):
      yield json.dumps({"dataset_id": dataset, "image_id": r.image_id,
                        "annotator_id": annotator, "caption": caption,
                        "timed_caption": [], "traces": [], "voice_recording": ""})


def export_world(data_dir: str, output_dir: str,
                 sources: Sequence[str] = generate_lib.ALL_SOURCES) -> dict[str, str]:
  """Writes every format for `sources` of the world in data_dir; {what: path}."""
  records = {s: list(records_lib.read_source_records(data_dir, s)) for s in sources}
  out = {}
  join = lambda *parts: os.path.join(output_dir, *parts)
  for source, recs in records.items():
    out[f"features/{source}"] = write_tsv(recs, join("features", f"{source}.tsv"),
                                          source=source)
    out[f"tags/{source}"] = _write_lines(join("tags", f"{source}.jsonl"),
                                         tags_lines(recs, source))
    if source in WEB_SOURCES:
      out[f"captions/{source}"] = _write_lines(join("captions", f"{source}.tsv"),
                                               cc_lines(recs, source))
    elif source in COCO_SOURCES or source == "nocaps_val":
      out[f"captions/{source}"] = _write_json(
          join("captions", f"{source}.json"),
          coco_json(recs, with_domain=source == "nocaps_val"))
    if source in LOCNAR_SOURCES:
      out[f"locnar/{source}"] = _write_lines(
          join("localized_narratives", f"{source}.jsonl"), locnar_lines(recs, source))
  flickr = {s.split("_")[1]: records[s] for s in FLICKR_SOURCES if s in records}
  if flickr:
    out["captions/flickr"] = _write_json(join("captions", "dataset_flickr30k.json"),
                                         karpathy_json(flickr))
  return out


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  for what, path in export_world(f.world_dir, f.output_dir,
                                 f.export_sources).items():
    print(f"{what:<24} {path}")


if __name__ == "__main__":
  # Defined here, not at import, and not named --data_dir / --sources, which
  # build_vocab (imported through generate) defines at import.
  flags.DEFINE_string("world_dir", None, "A generated synthetic world.")
  flags.DEFINE_string("output_dir", None, "Where to write the files.")
  flags.DEFINE_list("export_sources", list(generate_lib.ALL_SOURCES),
                    "Sources to export.")
  flags.mark_flags_as_required(["world_dir", "output_dir"])
  app.run(main)
