"""Text transforms (paper Section 2.2, step 4) and the image-text filter."""
import json

import pytest

from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import hypernyms
from cc12m_jax.curation import tag_overlap
from cc12m_jax.curation import transforms
from cc12m_jax.curation import words

CC3M = config_lib.preset_config("cc3m").transform
CC12M = config_lib.preset_config("cc12m").transform
WORDNET = hypernyms.resolve_wordnet_dir("auto")
needs_wordnet = pytest.mark.skipif(not WORDNET, reason="WordNet 3.0 database not installed "
                                   "(apt-get install wordnet-base)")


def test_cc12m_replaces_only_person_names(analyze):
  text = "Harrison Ford visits Tokyo with the new Chevrolet on 12 May 2019 at 5 pm."
  out = transforms.transform(text, analyze(text), CC12M)
  assert out.caption == "<PERSON> visits Tokyo with the new Chevrolet on 12 May 2019 at 5 pm."
  assert out.num_person_spans == 1 and out.num_deleted_spans == 0


def test_cc12m_two_people(analyze):
  text = "John Smith and Mary Johnson walk a dog in the park"
  out = transforms.transform(text, analyze(text), CC12M)
  assert out.caption == "<PERSON> and <PERSON> walk a dog in the park"
  assert "<person>" in words.caption_tokens(out.caption)


@needs_wordnet
def test_cc3m_hypernymizes_deletes_dates_and_abstracts_digits(analyze):
  hyper = hypernyms.Hypernymizer(WORDNET)
  text = "Harrison Ford visits Tokyo with the new Chevrolet on 12 May 2019 at 5 pm."
  out = transforms.transform(text, analyze(text), CC3M, hyper)
  # Tokyo -> WordNet 'national capital' -> coarse 'city'; the date and time
  # spans go with their prepositions; Chevrolet is unknown to WordNet (type table).
  assert out.caption == "person visits city with the new organization."
  assert (out.num_person_spans, out.num_deleted_spans, out.num_hypernymized) == (1, 2, 2)


@needs_wordnet
def test_wordnet_hypernyms_respect_the_entity_type():
  hyper = hypernyms.Hypernymizer(WORDNET)
  assert hyper("Tokyo", "GPE") == "city"
  assert hyper("France", "GPE") == "country"
  assert hyper("Nile", "LOC") == "river"
  assert hyper("Albert Einstein", "PERSON") == "physicist"
  # WordNet's first sense of 'Elvis' is a drug; the PERSON check rejects it.
  assert hyper("Elvis", "PERSON") == "person"


def test_digits_become_hash(analyze):
  text = "a house with 3 bedrooms and 2 cars"
  out = transforms.transform(text, analyze(text), CC3M, hypernyms.Hypernymizer())
  assert out.caption == "a house with # bedrooms and # cars"
  text = "a room with 250 chairs and a stage"
  assert transforms.transform(text, analyze(text), CC3M, hypernyms.Hypernymizer()).caption == \
      "a room with ### chairs and a stage"
  # cc12m keeps numbers.
  assert transforms.transform(text, analyze(text), CC12M).caption == text


def test_type_table_and_user_table_without_wordnet(analyze, tmp_path):
  table = tmp_path / "h.json"
  table.write_text(json.dumps({"Chevrolet": "car"}))
  hyper = hypernyms.Hypernymizer("", str(table))
  assert hyper("Chevrolet", "ORG") == "car"
  assert hyper("Tokyo", "GPE") == "place"       # no WordNet: entity-type table
  assert hyper("Jane Doe", "PERSON") == "person"
  with pytest.raises(ValueError, match="h2.json"):
    (tmp_path / "h2.json").write_text("[1, 2]")
    hypernyms.Hypernymizer("", str(tmp_path / "h2.json"))


def test_missing_wordnet_dir_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="wordnet_dir"):
    hypernyms.Hypernymizer(str(tmp_path))


def test_tag_overlap_allows_morphological_variants():
  cfg = config_lib.preset_config("cc12m").image_text
  alt = words.words("Two dogs running on sandy beaches with berries")
  tags = [["dog", 0.9], ["beach", 0.8], ["berry", 0.7], ["cat", 0.95]]
  assert tag_overlap.overlapping_tags(alt, tags, 0.5) == ["dog", "beach", "berry"]
  assert tag_overlap.tag_overlap_rejection(alt, [["running dog", 0.9]], cfg) is None
  assert tag_overlap.tag_overlap_rejection(alt, [["cat", 0.9]], cfg) == "image_text/tag_overlap"
  # A matching tag below the confidence threshold does not count.
  assert tag_overlap.tag_overlap_rejection(alt, [["dog", 0.2]], cfg) == \
      "image_text/no_confident_tags"
  assert tag_overlap.tag_overlap_rejection(alt, [], cfg) == "image_text/no_confident_tags"


def test_stem_variants():
  assert {words.stem(w) for w in ("dog", "dogs")} == {"dog"}
  assert words.stem("berries") == "berry"
  assert words.stem("running") == words.stem("run") == "run"
  assert words.stem("boxes") == "box"
  assert words.stem("glass") == "glass"
