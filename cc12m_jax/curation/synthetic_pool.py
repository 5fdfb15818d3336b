r"""A synthetic raw web pool: the input of the curation pipeline in the synthetic world.

Each candidate is an "image" showing 1-2 concepts of the synthetic inventory
(cc12m_jax.data.synthetic.concepts; Zipfian, long tail of novel concepts) with:
  - an alt-text in one of several web styles: clean descriptive sentences (the
    CC3M kind), sentences with person names, brands, places and dates, hashtag
    strings without prepositions (the paper's Figure 1 jellyfish), long
    paragraphs, and junk (file names, shouting, other languages, spam,
    unrelated text, HTML entities, emoji);
  - image bytes (real JPEG/PNG/GIF made with Pillow, some with lying
    metadata) or only claimed metadata, of varied sizes and shapes;
  - image tags (the shown concepts, confident, plus a low-confidence distractor)
    and sometimes a safety score.

Running the cc3m and cc12m presets on the same pool gives a small, clean,
hypernymized CC3M-like set and a several times larger CC12M-like set with far
more tail concepts (docs/curation.md shows the numbers).

python -m cc12m_jax.curation.synthetic_pool --output_dir=data/raw_pool \
    --num_candidates=20000 --num_shards=8 --format=both
"""
import base64
import io
import json
import os
from typing import Any, Sequence

from absl import app
from absl import flags
import numpy as np
from PIL import Image
import pyarrow as pa
import pyarrow.parquet as pq

from cc12m_jax.data.synthetic import concepts as concepts_lib

FIRST_NAMES = ("John", "Mary", "James", "Emma", "Michael", "Olivia", "David", "Sophia",
               "Robert", "Emily", "William", "Anna", "Thomas", "Laura", "Daniel", "Sarah")
LAST_NAMES = ("Smith", "Johnson", "Williams", "Brown", "Miller", "Davis", "Wilson",
              "Anderson", "Taylor", "Moore", "Jackson", "Martin", "Thompson", "Harris")
PLACES = ("Tokyo", "Paris", "London", "Toronto", "Kenya", "Texas", "California", "France",
          "Germany", "Africa", "Boston", "Hawaii")
MONTHS = ("January", "March", "May", "July", "September", "November")
SCENES = ("beach", "garden", "kitchen", "street", "park", "table", "field", "market",
          "studio", "forest", "river", "room", "shop", "road", "lake", "snow")
ADJECTIVES = ("small", "large", "red", "blue", "green", "old", "young", "wooden", "white",
              "black", "little", "big", "bright", "dark", "colorful", "tiny")
VERBS = ("holding", "with", "next to", "looking at", "carrying", "behind")
LONG_SENTENCES = (
    "this {adj} {c1} sits on a shelf near the window",
    "visitors often stop here to take pictures of it",
    "morning light falls across the wooden floor",
    "you can see mountains far away behind the trees",
    "our team photographed every detail during summer",
    "several children play quietly beside their parents",
    "the collection also includes paintings and old maps",
    "a narrow path leads down toward the harbor",
    "local farmers sell vegetables every weekend",
    "this picture was shared by a reader from abroad",
    "soft music played while guests arrived for dinner",
    "there is a {c2} on the left side of the frame",
)


def _title(name: str) -> str:
  return " ".join(w.capitalize() for w in name.split())


class _Writer:
  """Picks a style and fills it in; returns (alt_text, style)."""

  def __init__(self, rng: np.random.Generator, names: Sequence[str], brands: Sequence[str]):
    self.rng = rng
    self.names = names
    self.brands = brands

  def pick(self, seq):
    return seq[self.rng.integers(len(seq))]

  def person(self) -> str:
    return f"{self.pick(FIRST_NAMES)} {self.pick(LAST_NAMES)}"

  def date(self) -> str:
    r = self.rng.integers(3)
    year = int(self.rng.integers(2010, 2021))
    if r == 0:
      return f"on {int(self.rng.integers(1, 28))} {self.pick(MONTHS)} {year}"
    if r == 1:
      return f"in {self.pick(MONTHS)} {year}"
    return f"in {year}"

  def write(self, c1: str, c2: str) -> tuple[str, str]:
    adj, scene, pick = self.pick(ADJECTIVES), self.pick(SCENES), self.pick
    styles = (
        ("descriptive", 6), ("person", 8), ("place", 4), ("dated", 4), ("brand", 3),
        ("hashtag", 19), ("long", 15), ("title_case", 11), ("junk_file", 3),
        ("shouting", 2), ("foreign", 3), ("spam", 2), ("unrelated", 3), ("html", 3),
        ("emoji", 3), ("opinion", 7), ("two_words", 2))
    weights = np.array([w for _, w in styles], dtype=np.float64)
    style = styles[self.rng.choice(len(styles), p=weights / weights.sum())][0]
    if style == "descriptive":
      text = pick((f"a {adj} {c1} on the {scene}", f"the {c1} and a {c2} in the {scene}",
                   f"a {c1} near the {scene} with a {c2}", f"close up of a {adj} {c1} in a {scene}"))
    elif style == "person":
      text = f"{self.person()} {pick(VERBS)} a {adj} {c1} in the {scene}"
    elif style == "place":
      text = f"a {adj} {c1} in the {scene} in {pick(PLACES)}"
    elif style == "dated":
      text = f"a {c1} in the {scene} {self.date()}"
    elif style == "brand":
      text = f"the new {_title(pick(self.brands))} {c1} on display at the {scene}"
    elif style == "hashtag":
      text = (f"#{c1.replace(' ', '')} #{adj} #{scene} {_title(c2)} Wallpaper, "
              f"the best {c1} ideas")
    elif style == "long":
      n = int(self.rng.integers(5, len(LONG_SENTENCES)))
      order = self.rng.permutation(len(LONG_SENTENCES))[:n]
      text = f"a {c1} in the {scene}. " + ". ".join(
          LONG_SENTENCES[i].format(adj=adj, c1=c1, c2=c2) for i in order) + "."
    elif style == "title_case":
      text = f"The {_title(adj)} {_title(c1)} In The {_title(scene)} For {_title(c2)} Lovers"
    elif style == "junk_file":
      text = pick((f"IMG_{int(self.rng.integers(1000, 9999))}.JPG",
                   f"DSC{int(self.rng.integers(10000, 99999))}", "untitled", ""))
    elif style == "shouting":
      text = f"A {adj} {c1} IN THE {scene} FOR SALE NOW".upper()
    elif style == "foreign":
      text = pick((f"le {c1} sur la table dans le jardin", f"el {c1} en la playa con una {c2}",
                   "公園で遊ぶ犬と猫", "собака на пляже у моря"))
    elif style == "spam":
      text = f"{c1} {c1} {c1} best {c1} cheap {c1} {c1} deals"
    elif style == "unrelated":
      text = pick(("click here to buy now and get free shipping on all orders",
                   "a view of the home page of the website", "the best deals of the week"))
    elif style == "html":
      text = f"a {c1} &amp; a {c2} on the &quot;{scene}&quot; at <b>noon</b>"
    elif style == "emoji":
      text = f"a {c1} 😍 in the {scene} 🌴✨"
    elif style == "opinion":
      text = f"the most amazing beautiful {c1} ever, so lovely and awesome"
    else:  # two_words
      text = f"{adj} {c1}"
    return text, style


def _image_spec(rng: np.random.Generator) -> tuple[str, int, int]:
  fmt = rng.choice(("JPEG", "PNG", "GIF", "WEBP"), p=(0.88, 0.06, 0.03, 0.03))
  short = int(rng.choice((int(rng.integers(200, 400)), int(rng.integers(401, 1000))),
                         p=(0.06, 0.94)))
  ratio = float(rng.choice((rng.uniform(1.0, 2.0), rng.uniform(2.0, 2.5), rng.uniform(2.5, 4.0)),
                           p=(0.76, 0.2, 0.04)))
  long = int(short * ratio)
  return (str(fmt), long, short) if rng.random() < 0.6 else (str(fmt), short, long)


def image_bytes(fmt: str, width: int, height: int, color: tuple[int, int, int]) -> bytes:
  """A small real image file of the given format and size (flat colour + a box)."""
  mode = "P" if fmt == "GIF" else "RGB"
  image = Image.new("RGB", (width, height), color)
  image.paste(tuple(255 - c for c in color), (width // 4, height // 4, width // 2, height // 2))
  if mode == "P":
    image = image.convert("P")
  buf = io.BytesIO()
  image.save(buf, format=fmt, **({"quality": 30} if fmt == "JPEG" else {}))
  return buf.getvalue()


def generate_pool(num_candidates: int, *, num_concepts: int = 200, seed: int = 0,
                  bytes_fraction: float = 0.25, zipf_exponent: float = 0.7) -> tuple[list[dict[str, Any]], dict[str, str]]:
  """Returns (raw candidate dicts, hypernym table for brands/characters).

  Candidates with bytes carry `image_bytes` (raw bytes); the others claim
  `format`, `width`, `height`. Concepts are drawn with Zipf exponent
  `zipf_exponent` (below 1: a heavier tail, like web alt-text). Deterministic
  in the arguments.
  """
  rng = np.random.default_rng(seed)
  inventory = concepts_lib.build_inventory(num_concepts, seed, zipf_exponent=zipf_exponent)
  freqs = np.array([c.frequency for c in inventory])
  freqs = freqs / freqs.sum()
  brands = [c.name for c in inventory if c.hypernym == "brand"] or ["acme"]
  writer = _Writer(rng, [c.name for c in inventory], brands)
  table = {c.name: ("product" if c.hypernym == "brand" else c.hypernym)
           for c in inventory if c.hypernym in ("brand", "character")}
  pool = []
  for i in range(num_candidates):
    first, second = rng.choice(len(inventory), size=2, replace=False, p=freqs)
    c1, c2 = inventory[first], inventory[second]
    text, style = writer.write(c1.name, c2.name)
    tags = [{"name": c1.name, "score": round(float(rng.uniform(0.6, 0.99)), 3)},
            {"name": inventory[int(rng.integers(len(inventory)))].name,
             "score": round(float(rng.uniform(0.05, 0.45)), 3)}]
    if style in ("descriptive", "long", "hashtag") and rng.random() < 0.5:
      tags.append({"name": c2.name, "score": round(float(rng.uniform(0.5, 0.9)), 3)})
    fmt, width, height = _image_spec(rng)
    record: dict[str, Any] = {"id": f"raw-{seed}-{i:07d}",
                              "url": f"https://img.example.com/{seed}/{i}.jpg",
                              "alt_text": text, "tags": tags, "style": style}
    if rng.random() < bytes_fraction:
      color = tuple(int(v) for v in rng.integers(0, 256, size=3))
      record["image_bytes"] = image_bytes(fmt, width, height, color)
      if rng.random() < 0.2:  # claims the header will overrule
        record.update(format="JPEG", width=1024, height=768)
    else:
      record.update(format=fmt, width=width, height=height)
    if rng.random() < 0.3:
      record["safety_score"] = round(float(rng.beta(1, 12)), 4)
    pool.append(record)
  return pool, table


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
  out = dict(record)
  if "image_bytes" in out:
    out["image_base64"] = base64.b64encode(out.pop("image_bytes")).decode("ascii")
  return out


def write_pool(pool: list[dict[str, Any]], output_dir: str, num_shards: int,
               fmt: str = "jsonl") -> list[str]:
  """Writes shards `pool-XXXXX-of-NNNNN.{jsonl,parquet}`; 'both' alternates formats."""
  os.makedirs(output_dir, exist_ok=True)
  paths = []
  for shard in range(num_shards):
    records = pool[shard::num_shards]
    shard_fmt = fmt if fmt != "both" else ("jsonl" if shard % 2 == 0 else "parquet")
    path = os.path.join(output_dir, f"pool-{shard:05d}-of-{num_shards:05d}.{shard_fmt}")
    if shard_fmt == "jsonl":
      with open(path, "w", encoding="utf-8") as f:
        for r in records:
          f.write(json.dumps(_jsonable(r), ensure_ascii=False) + "\n")
    else:
      columns = ("id", "url", "alt_text", "image_bytes", "format", "width", "height", "tags",
                 "safety_score", "style")
      table = pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in records],
                                   schema=_PARQUET_SCHEMA)
      pq.write_table(table, path)
    paths.append(path)
  return paths


_PARQUET_SCHEMA = pa.schema([
    ("id", pa.string()), ("url", pa.string()), ("alt_text", pa.string()),
    ("image_bytes", pa.binary()), ("format", pa.string()), ("width", pa.int64()),
    ("height", pa.int64()),
    ("tags", pa.list_(pa.struct([("name", pa.string()), ("score", pa.float64())]))),
    ("safety_score", pa.float64()), ("style", pa.string()),
])

def _define_flags() -> None:
  """CLI flags, defined only when run as a program (no clashes on import)."""
  flags.DEFINE_string("output_dir", None, "Where to write the pool shards.")
  flags.DEFINE_integer("num_candidates", 20_000, "Raw candidates.")
  flags.DEFINE_integer("num_concepts", 200, "Concept inventory size.")
  flags.DEFINE_integer("num_shards", 8, "Output shards.")
  flags.DEFINE_enum("format", "both", ["jsonl", "parquet", "both"], "Shard format.")
  flags.DEFINE_integer("seed", 0, "Random seed.")
  flags.DEFINE_float("zipf_exponent", 0.7, "Zipf exponent of concept frequencies.")
  flags.DEFINE_float("bytes_fraction", 0.25, "Share of candidates carrying real image bytes.")
  flags.mark_flag_as_required("output_dir")


def main(argv: Sequence[str]) -> None:
  del argv
  f = flags.FLAGS
  pool, table = generate_pool(f.num_candidates, num_concepts=f.num_concepts, seed=f.seed,
                              bytes_fraction=f.bytes_fraction, zipf_exponent=f.zipf_exponent)
  paths = write_pool(pool, f.output_dir, f.num_shards, f.format)
  table_path = os.path.join(f.output_dir, "hypernyms.json")
  with open(table_path, "w", encoding="utf-8") as fh:
    json.dump(table, fh, indent=1, sort_keys=True)
  print(f"wrote {len(pool)} candidates in {len(paths)} shards to {f.output_dir}; "
        f"hypernym table {table_path}")


if __name__ == "__main__":
  _define_flags()
  app.run(main)
