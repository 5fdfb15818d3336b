"""The synthetic long-tail world: inventory, determinism, sources, files."""
import collections
import filecmp
import json
import os

import numpy as np
import pytest

from cc12m_jax.curation import config as curation_config
from cc12m_jax.curation import tag_overlap
from cc12m_jax.curation import words as words_lib
from cc12m_jax.data import image_text_check
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.data.synthetic import captions as captions_lib
from cc12m_jax.data.synthetic import concepts as concepts_lib
from cc12m_jax.data.synthetic import generate as generate_lib
from cc12m_jax.data.synthetic import world as world_lib
from cc12m_jax.data.text import vocab_file
from cc12m_jax.evaluation import concepts
from data_fixtures import FEATURE_DIM, tiny_config


def test_inventory_is_deterministic_and_long_tailed():
  inv = concepts_lib.build_inventory(600, seed=0)
  assert inv == concepts_lib.build_inventory(600, seed=0)
  assert inv != concepts_lib.build_inventory(600, seed=1)
  assert len(inv) == 600 and len({c.name for c in inv}) == 600
  domains = collections.Counter(c.domain for c in inv)
  assert domains["in-domain"] == 80
  assert domains["near-domain"] > 100 and domains["out-domain"] > 100
  # Proper names are no nocaps class (nocaps annotates object classes, which
  # CC3M names: Table 9), so they are web-only, and only they are.
  assert domains["web-only"] > 50
  assert all((c.domain == "web-only") == (c.hypernym in concepts_lib.NAMED_ENTITY_HYPERNYMS)
             for c in inv)
  freqs = np.array([c.frequency for c in inv])
  assert abs(freqs.sum() - 1) < 1e-9 and (np.diff(freqs) <= 0).all()
  # Zipf: rank 1 is ~100x rank 100; COCO concepts hold the head.
  assert 50 < freqs[0] / freqs[99] < 200
  assert all(c.domain == "in-domain" for c in inv[:80])
  assert all(c.name == c.name.lower() and c.name.strip() == c.name
             for c in inv)
  hypernyms = {c.hypernym for c in inv}
  assert {"fruit", "animal", "instrument", "vehicle", "sport", "place",
          "brand", "food"} <= hypernyms


def test_small_inventory_keeps_every_domain():
  inv = concepts_lib.build_inventory(40, seed=3)
  assert {c.domain for c in inv} == set(concepts_lib.CONCEPT_DOMAINS)


def test_same_seed_same_bytes(tiny_world, tmp_path):
  cfg, data_dir, _ = tiny_world
  again = str(tmp_path / "again")
  generate_lib.generate(tiny_config(seed=0), again, log=lambda _: None)
  files = sorted(os.path.relpath(os.path.join(root, f), data_dir)
                 for root, _, names in os.walk(data_dir) for f in names)
  assert len(files) > 20
  match, mismatch, errors = filecmp.cmpfiles(data_dir, again, files,
                                             shallow=False)
  assert not mismatch and not errors and len(match) == len(files)
  # Another seed gives another world.
  cfg1 = tiny_config(seed=1)
  spec0, spec1 = (generate_lib._source_specs(c.synthetic, world_lib.World(
      c.synthetic.num_concepts, FEATURE_DIM, c.synthetic.seed))[1]
                  for c in (cfg, cfg1))
  rec0, rec1 = (next(generate_lib._records(spec, world_lib.World(
      c.synthetic.num_concepts, FEATURE_DIM, c.synthetic.seed),
      c.synthetic.seed, print, {})) for spec, c in ((spec0, cfg), (spec1, cfg1)))
  assert not np.array_equal(rec0.global_feature, rec1.global_feature)


def test_sources_and_summary(tiny_world):
  cfg, data_dir, summary = tiny_world
  syn = cfg.synthetic
  expected = {"cc3m": (syn.num_cc3m, 1), "cc12m": (syn.num_cc12m, 1),
              "coco_train": (syn.num_coco_train, 5),
              "coco_val": (syn.num_coco_val, 5),
              "nocaps_val": (syn.num_nocaps_val, 10),
              "flickr_train": (12, 5), "flickr_val": (3, 5),
              "flickr_test": (3, 5), "cc3m_dev": (syn.num_cc3m_dev, 1)}
  for source, (n, caps) in expected.items():
    meta = metadata_lib.load_metadata(data_dir, source)
    assert (meta.num_records, meta.num_captions, meta.feature_dim) == (
        n, n * caps, FEATURE_DIM), source
    assert summary["sources"][source] == {"records": n, "captions": n * caps}
    assert meta.feature_dtype == cfg.synthetic.feature_dtype == "float16"
    recs = list(records_lib.read_source_records(data_dir, source))
    assert len(recs) == n and all(len(r.captions) == caps for r in recs)
    assert all(1 <= len(r.region_features) <= 16 and len(r.tags) <= 16
               for r in recs)
  assert summary["skipped"] == {r: 0 for r in records_lib.BAD_REASONS}
  vocab = vocab_file.load_vocab(os.path.join(data_dir, "vocab.txt"))
  assert summary["vocab_size"] == len(vocab)
  text = generate_lib.format_summary(summary, data_dir)
  assert "cc12m" in text and "vocab size" in text


def test_caption_styles(tiny_world):
  cfg, data_dir, _ = tiny_world
  inventory = {c.name: c for c in concepts_lib.build_inventory(
      cfg.synthetic.num_concepts, cfg.synthetic.seed)}

  def read(source):
    return list(records_lib.read_source_records(data_dir, source))

  def named(caption):
    return {n for n in inventory if f" {n} " in f" {caption} "}

  # COCO names COCO's classes, plus (coco_novel_fraction of photos) one
  # novel thing that all five annotators of that photo name.
  novel_images = 0
  for r in read("coco_train"):
    novel = [{n for n in named(c) if inventory[n].domain != "in-domain"} for c in r.captions]
    assert all(len(n) <= 1 for n in novel) and all(n == novel[0] for n in novel), r.captions
    novel_images += bool(novel[0])
  assert novel_images < len(read("coco_train")) / 2
  cc3m = " ".join(c for r in read("cc3m") for c in r.captions)
  assert not any(ch.isdigit() for ch in cc3m) and "<PERSON>" not in cc3m
  cc12m = read("cc12m")
  text = " ".join(c for r in cc12m for c in r.captions)
  assert "#" in text and "<PERSON>" in text and any(ch.isdigit() for ch in text)
  assert any(r.image_id.startswith("cc3m_") for r in cc12m)
  mean_len = lambda s: np.mean([len(c.split()) for c in s.split("\n")])
  assert mean_len("\n".join(c for r in cc12m for c in r.captions)) > (
      mean_len("\n".join(c for r in read("cc3m") for c in r.captions)))
  nocaps = read("nocaps_val")
  assert {r.domain for r in nocaps} == {"in-domain", "near-domain",
                                        "out-domain"}
  # Ten annotators phrase one image ten ways, and every one names all it shows.
  with open(os.path.join(data_dir, "nocaps_val", "concepts.json")) as f:
    shown = json.load(f)
  for r in nocaps:
    assert all(set(shown[r.image_id]) <= named(c) for c in r.captions), (shown[r.image_id],
                                                                        r.captions)
  assert not any(inventory[n].domain == "web-only" for r in nocaps for n in shown[r.image_id])
  assert np.mean([len(set(r.captions)) for r in nocaps]) >= 8


def test_region_features_identify_concepts():
  """Learnability: every salient concept of an image has a region whose
  nearest prototype (out of 600) is that concept (at a realistic D)."""
  world = world_lib.World(600, 128, seed=0)
  rng = np.random.default_rng(0)
  found = total = 0
  for _ in range(200):
    scene = world.sample_scene(rng)
    rendered = world.render(scene, rng)
    nearest = set((rendered.region_features @ world.concept_protos.T
                   ).argmax(1).tolist())                          # [N] -> set
    for inst in scene.instances:
      total += 1
      found += inst.concept in nearest
  assert found / total > 0.98


def test_reference_files(tiny_world):
  _, data_dir, _ = tiny_world
  with open(os.path.join(data_dir, "coco_val", "captions.json")) as f:
    coco = json.load(f)
  assert len(coco["images"]) == 10 and len(coco["annotations"]) == 50
  with open(os.path.join(data_dir, "nocaps_val", "nocaps_val.json")) as f:
    nocaps = json.load(f)
  assert {i["domain"] for i in nocaps["images"]} == {
      "in-domain", "near-domain", "out-domain"}
  assert len(nocaps["annotations"]) == 10 * len(nocaps["images"])
  with open(os.path.join(data_dir, "flickr", "dataset_flickr30k.json")) as f:
    flickr = json.load(f)
  splits = collections.Counter(i["split"] for i in flickr["images"])
  assert splits == {"train": 12, "val": 3, "test": 3}
  assert all(len(i["sentences"]) == 5 for i in flickr["images"])


def test_eval_sources_record_what_each_image_shows(tiny_world):
  """<source>/concepts.json: the concepts of each image, which its clean references name."""
  _, data_dir, _ = tiny_world
  matcher = concepts.ConceptMatcher(concepts.Concept(c.name) for c in
                                    concepts_lib.build_inventory(tiny_config().synthetic.num_concepts,
                                                                 tiny_config().synthetic.seed))
  with open(os.path.join(data_dir, "nocaps_val", "nocaps_val.json")) as f:
    nocaps = json.load(f)
  with open(os.path.join(data_dir, "nocaps_val", "concepts.json")) as f:
    shown = json.load(f)
  refs = collections.defaultdict(list)
  ids = {i["id"]: i["file_name"][:-len(".jpg")] for i in nocaps["images"]}
  for ann in nocaps["annotations"]:
    refs[ids[ann["image_id"]]].append(ann["caption"])
  assert sorted(shown) == sorted(refs) and all(shown.values())
  for image_id, captions in refs.items():
    for caption in captions:  # coco-style references name every concept shown
      assert matcher.mentions(caption) == set(shown[image_id]), (image_id, caption)
  for source in generate_lib.EVAL_SOURCES:
    assert os.path.exists(os.path.join(data_dir, source, "concepts.json"))
  assert not os.path.exists(os.path.join(data_dir, "cc12m", "concepts.json"))


def test_bad_sizes_fail_before_writing(tmp_path):
  cfg = tiny_config()
  cfg.synthetic.num_flickr = 2
  with pytest.raises(ValueError, match="flickr_train"):
    generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "w")


def _examples(source: str, n: int, **knobs):
  """The world and (scene, captions) of a source's first n images, with knobs set."""
  cfg = tiny_config().synthetic
  for key, value in knobs.items():
    cfg[key] = value
  world = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed,
                          zipf_exponent=cfg.zipf_exponent)
  spec = {s.name: s for s in generate_lib._source_specs(cfg, world)}[source]
  return world, [spec.make(world, i, generate_lib.image_rng(cfg.seed, source, i))[:2]
                 for i in range(n)]


def _scenes(source: str, n: int, **knobs):
  world, examples = _examples(source, n, **knobs)
  return world, [scene for scene, _ in examples]


def _novel_share(world, scenes):
  return np.mean([any(world.concepts[i.concept].domain != concepts_lib.IN_DOMAIN
                      for i in s.instances) for s in scenes])


def test_table9_calibration_knobs():
  """cc3m_novel_keep thins novel concepts out of CC3M; coco_novel_fraction adds them to COCO."""
  world, cc3m = _scenes("cc3m", 400, cc3m_novel_keep=1.0)
  _, cc3m_filtered = _scenes("cc3m", 400, cc3m_novel_keep=0.0)
  assert _novel_share(world, cc3m) > 0.2 and _novel_share(world, cc3m_filtered) == 0.0
  _, coco = _scenes("coco_train", 400, coco_novel_fraction=0.0)
  _, coco_novel = _scenes("coco_train", 400, coco_novel_fraction=0.5)
  assert _novel_share(world, coco) == 0.0
  assert 0.2 < _novel_share(world, coco_novel) < 0.5  # 0.5 x P(fewer than 3 concepts)
  # A flatter Zipf puts more of the web's mass on the tail.
  steep = world_lib.World(40, FEATURE_DIM, 0, zipf_exponent=1.0).frequencies[-20:].sum()
  flat = world_lib.World(40, FEATURE_DIM, 0, zipf_exponent=0.5).frequencies[-20:].sum()
  assert flat > steep


def test_cc3m_misaligned_fraction_names_something_else():
  """At 0 every CC3M-style caption names the image's first concept (as CC3M
  writes it); at 0.5 about half name one drawn from the web's frequencies."""
  def share_naming_first(fraction):
    world, examples = _examples("cc3m", 400, cc3m_misaligned_fraction=fraction)
    return np.mean([f" {captions_lib._cc3m_name(world, scene.instances[0].concept)} "
                    in f" {captions[0]} " for scene, captions in examples])
  assert share_naming_first(0.0) == 1.0
  assert 0.35 < share_naming_first(0.5) < 0.65


def test_cc12m_context_lengthens_alt_texts_without_naming_concepts():
  """cc12m_context_words appends what else an alt-text says: the alt-text's
  head, the image and its features are the same, the words added average about
  the knob (whole segments round it up) and name no concept."""
  cfg = tiny_config().synthetic
  world = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed,
                          zipf_exponent=cfg.zipf_exponent)
  matcher = concepts.ConceptMatcher(concepts.Concept(c.name) for c in world.concepts)
  vocab = captions_lib.web_vocabulary(cfg.web_vocab_size, cfg.seed, world)
  assert not {c.name for c in world.concepts} & set(vocab.words)
  assert not any(matcher.mentions(word + "s") for word in vocab.words)

  def made(context_words):
    cfg.cc12m_context_words = context_words
    spec = {s.name: s for s in generate_lib._source_specs(cfg, world)}["cc12m"]
    examples = []
    for i in range(300):
      scene, captions, _, _, rng = spec.make(
          world, i, generate_lib.image_rng(cfg.seed, "cc12m", i))
      examples.append((scene, captions[0], world.render(scene, rng).global_feature))
    return examples

  added = []
  for (scene, head, feature), (scene6, text, feature6) in zip(made(0.0), made(6.0)):
    assert scene == scene6 and text.startswith(head)
    np.testing.assert_array_equal(feature, feature6)
    assert matcher.mentions(text) == matcher.mentions(head), text
    added.append(len(text.split()) - len(head.split()))
  assert 6.0 < np.mean(added) < 8.5 and min(added) < 3 and max(added) > 12  # Poisson


def test_cc12m_caption_style_cc3m_rewrites_captions_of_the_same_images():
  """cc12m_caption_style='cc3m' keeps the cc12m source's scenes, ids and (at
  the same cc12m_misaligned_fraction) features, and writes each pair as a CC3M-style caption: no alt-text words,
  no web context, the image's first concept (as CC3M writes it) named unless
  misaligned, at cc12m_misaligned_fraction."""
  cfg = tiny_config().synthetic
  world = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed,
                          zipf_exponent=cfg.zipf_exponent)

  def made(style, misaligned):
    cfg.cc12m_caption_style, cfg.cc12m_misaligned_fraction = style, misaligned
    spec = {s.name: s for s in generate_lib._source_specs(cfg, world)}["cc12m"]
    examples = []
    for i in range(400):
      scene, captions, _, image_id, rng = spec.make(
          world, i, generate_lib.image_rng(cfg.seed, "cc12m", i))
      examples.append((scene, captions[0], image_id, world.render(scene, rng).global_feature))
    return examples

  for misaligned, lo, hi in ((0.0, 1.0, 1.0), (0.5, 0.35, 0.65)):
    alt_text, rewritten = made("alt_text", misaligned), made("cc3m", misaligned)
    naming_first = []
    for (scene, alt, image_id, feature), (scene3, text, image_id3, feature3) in zip(
        alt_text, rewritten):
      assert scene == scene3 and image_id == image_id3
      np.testing.assert_array_equal(feature, feature3)
      assert text != alt and "<PERSON>" not in text and "|" not in text
      assert not any(b in text for b in captions_lib._BOILERPLATE), text
      naming_first.append(
          f" {captions_lib._cc3m_name(world, scene.instances[0].concept)} " in f" {text} ")
    assert lo <= np.mean(naming_first) <= hi, (misaligned, np.mean(naming_first))


def test_web_image_text_filter_keeps_only_pairs_the_curation_filter_passes(tmp_path):
  """With web_image_text_filter every cc12m pair passes the curation's own
  image-text filter (and every cc3m pair on its raw, unhypernymized text),
  the poor-fit share stays the knob's, and the rejected candidates are
  counted; without it about a fifth of cc12m's pairs would fail."""
  cfg = tiny_config()
  syn = cfg.synthetic
  world = world_lib.World(syn.num_concepts, FEATURE_DIM, syn.seed,
                          zipf_exponent=syn.zipf_exponent)
  image_text = curation_config.preset_config("cc12m").image_text

  def made(filtered, source, n=500):
    syn.web_image_text_filter = filtered
    rejected = collections.Counter()
    spec = {s.name: s for s in generate_lib._source_specs(syn, world, rejected)}[source]
    out = []
    for i in range(n):
      scene, (text,), _, _, rng = spec.make(world, i, generate_lib.image_rng(syn.seed, source, i))
      rendered = world.render(scene, rng)
      tags = [[t, float(v)] for t, v in zip(rendered.tags, rendered.tag_scores)]
      fails = tag_overlap.tag_overlap_rejection(words_lib.words(text), tags, image_text)
      first = world.concepts[scene.instances[0].concept].name
      out.append((fails, first in text))
    return out, rejected

  raw, none_rejected = made(False, "cc12m")
  kept, rejected = made(True, "cc12m")
  assert not none_rejected
  assert 0.1 < np.mean([f is not None for f, _ in raw]) < 0.35
  assert all(f is None for f, _ in kept)
  # Each raw failure is redrawn, a poor fit often several times.
  assert sum(f is not None for f, _ in raw) <= rejected["cc12m"] < 10 * len(raw)
  # The poor-fit share is the raters' share of kept pairs: it does not move.
  assert abs(np.mean([n for _, n in kept]) - np.mean([n for _, n in raw])) < 0.07
  _, rejected3 = made(True, "cc3m", n=300)
  assert rejected3["cc3m"] > 0 and set(rejected3) == {"cc3m"}

  syn.web_image_text_filter = True
  summary = generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  counts = image_text_check.check_sources(str(tmp_path / "w"), ["cc12m"])["cc12m"]
  assert counts["pass"] == counts["captions"] == syn.num_cc12m
  line = generate_lib.format_summary(summary, str(tmp_path / "w")).splitlines()[-3]
  assert line.startswith("candidates the image-text filter rejected: cc3m="), line
  assert f"cc12m={summary['sources']['cc12m']['filter_rejected']} (" in line


def test_web_image_text_filter_needs_alt_texts(tmp_path):
  cfg = tiny_config()
  cfg.synthetic.web_image_text_filter, cfg.synthetic.cc12m_caption_style = True, "cc3m"
  with pytest.raises(ValueError, match="web_image_text_filter filters alt-texts"):
    generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "w")


def test_bad_caption_style_fails_before_writing(tmp_path):
  cfg = tiny_config()
  cfg.synthetic.cc12m_caption_style = "cc3"
  with pytest.raises(ValueError, match="cc12m_caption_style: 'cc3'"):
    generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "w")


def test_bad_context_knobs_fail_before_writing(tmp_path):
  cfg = tiny_config()
  cfg.synthetic.cc12m_context_words = -1.0
  with pytest.raises(ValueError, match="cc12m_context_words"):
    generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  cfg.synthetic.cc12m_context_words, cfg.synthetic.web_vocab_size = 2.0, 0
  with pytest.raises(ValueError, match="web_vocab_size"):
    generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "w")


@pytest.mark.parametrize("split", ["flickr_val", "flickr_test"])
def test_gallery_size_changes_only_its_split_and_later(tiny_world, tmp_path, split):
  """num_flickr_val / num_flickr_test grow a retrieval gallery (Flickr30K's are
  1,000 images each) without touching any source before it (val shifts only
  the test images' ids), and the smaller gallery's images stay."""
  _, data_dir, _ = tiny_world
  cfg = tiny_config(seed=0)
  cfg.synthetic[f"num_{split}"] = 7
  bigger = str(tmp_path / "bigger")
  generate_lib.generate(cfg, bigger, log=lambda _: None)
  changed = {"flickr_val", "flickr_test"} if split == "flickr_val" else {"flickr_test"}
  for source in generate_lib.ALL_SOURCES:
    if source in changed:
      continue
    names = sorted(os.listdir(os.path.join(data_dir, source)))
    assert names == sorted(os.listdir(os.path.join(bigger, source))), source
    _, mismatch, errors = filecmp.cmpfiles(os.path.join(data_dir, source),
                                           os.path.join(bigger, source), names, shallow=False)
    assert not mismatch and not errors, (source, mismatch, errors)
  small = {r.image_id: r for r in records_lib.read_source_records(data_dir, split)}
  large = {r.image_id: r for r in records_lib.read_source_records(bigger, split)}
  assert len(small) == 3 and len(large) == 7 and set(small) < set(large)
  for image_id, record in small.items():
    assert list(record.captions) == list(large[image_id].captions), image_id
    np.testing.assert_array_equal(record.region_features, large[image_id].region_features)


def test_appearance_modes_change_features_and_tags_never_captions():
  """Modes are drawn when an image is rendered, after its captions: every
  source's captions (so every Table 9 count and caption statistic) are the
  same with and without them, and the features are not."""
  cfg = tiny_config().synthetic
  plain = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed,
                          zipf_exponent=cfg.zipf_exponent)
  modal = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed,
                          zipf_exponent=cfg.zipf_exponent, num_modes=4)
  for spec, modal_spec in zip(generate_lib._source_specs(cfg, plain),
                              generate_lib._source_specs(cfg, modal)):
    for i in range(min(spec.num_records, 20)):
      made = [s.make(w, i, generate_lib.image_rng(cfg.seed, spec.name, i))
              for s, w in ((spec, plain), (modal_spec, modal))]
      (scene, caps, domain, image_id, rng), (scene4, caps4, domain4, id4, rng4) = made
      assert (scene, caps, domain, image_id) == (scene4, caps4, domain4, id4), spec.name
      assert not np.array_equal(plain.render(scene, rng).region_features,
                                modal.render(scene4, rng4).region_features)
  # One mode is the world before modes: the concept's own prototype, no draw.
  one = world_lib.World(cfg.num_concepts, FEATURE_DIM, cfg.seed, num_modes=1)
  np.testing.assert_array_equal(one.mode_protos[:, 0], one.concept_protos)
  rng = np.random.default_rng(0)
  state = rng.bit_generator.state
  one.modes(world_lib.Scene([world_lib.Instance(0, 0)], 0), rng)
  assert rng.bit_generator.state == state


def test_appearance_modes_share_a_part_and_follow_their_frequencies():
  world = world_lib.World(60, 256, 0, num_modes=6, mode_shared=0.4, mode_zipf_exponent=1.0)
  protos = world.mode_protos / np.linalg.norm(world.mode_protos, axis=-1, keepdims=True)
  cos = np.einsum("cmd,cnd->cmn", protos, protos)                   # [C, M, M]
  off_diagonal = cos[:, ~np.eye(6, dtype=bool)]
  assert abs(off_diagonal.mean() - 0.4) < 0.03        # the shared share of variance
  other = np.einsum("md,nd->mn", protos[0], protos[1])  # modes of two concepts
  assert abs(other.mean()) < 0.05
  expected = (1 / np.arange(1, 7)) / (1 / np.arange(1, 7)).sum()
  np.testing.assert_allclose(world.mode_frequencies, expected)
  rng = np.random.default_rng(1)
  scene = world_lib.Scene([world_lib.Instance(c, 0) for c in range(3)], 0)
  drawn = np.bincount(np.concatenate([world.modes(scene, rng) for _ in range(4000)]),
                      minlength=6) / 12000
  np.testing.assert_allclose(drawn, expected, atol=0.015)
  # A region is nearest its own mode's prototype among the concept's modes.
  rendered_rng = np.random.default_rng(2)
  hits = 0
  for _ in range(200):
    state = rendered_rng.bit_generator.state
    modes = world.modes(scene, rendered_rng)
    rendered_rng.bit_generator.state = state
    rendered = world.render(scene, rendered_rng)
    nearest = {(c, int((rendered.region_features @ world.mode_protos[c].T).argmax(1)[r]))
               for r in range(len(rendered.region_features)) for c in range(3)}
    hits += all((c, m) in nearest for c, m in enumerate(modes))
  assert hits / 200 > 0.95


def test_bad_mode_knobs_fail_before_writing(tmp_path):
  for key, value in (("appearance_modes", 0), ("mode_shared", 1.5),
                     ("mode_zipf_exponent", -1.0)):
    cfg = tiny_config()
    cfg.synthetic[key] = value
    with pytest.raises(ValueError, match=f"{key} "):
      generate_lib.generate(cfg, str(tmp_path / "w"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "w")
