"""The concept-mention matcher on hand-written captions."""
import pytest

from cc12m_jax.evaluation import concepts

MATCHER = concepts.ConceptMatcher([
    concepts.Concept("dog"), concepts.Concept("hot dog", ("frankfurter",)),
    concepts.Concept("bus"), concepts.Concept("berry"), concepts.Concept("knife"),
    concepts.Concept("man", ("gentleman",)), concepts.Concept("fire hydrant"),
    concepts.Concept("cat"), concepts.Concept("sheep"), concepts.Concept("bagpipes"),
    concepts.Concept("potato"), concepts.Concept("box"),
])


@pytest.mark.parametrize("caption, expected", [
    ("a dog on the grass", {"dog"}),
    ("Two DOGS play.", {"dog"}),                          # plural, case
    ("a hot dog on a plate", {"hot dog"}),                # multi-word wins over "dog"
    ("hot dogs and a dog", {"hot dog", "dog"}),
    ("a frankfurter with mustard", {"hot dog"}),          # synonym
    ("two buses and some berries", {"bus", "berry"}),     # -es, -ies plurals
    ("knives on a table", {"knife"}),                     # -fe -> -ves
    ("three men and a gentleman", {"man"}),               # irregular plural, synonym
    ("a red fire-hydrant", {"fire hydrant"}),             # punctuation splits words
    ("fire hydrants on the street", {"fire hydrant"}),    # plural of the last word
    ("a category of bobcats", set()),                     # no partial-word matches
    ("scattered boxes", {"box"}),                         # "cat" inside "scattered": no
    ("sheep in a field", {"sheep"}),                      # same plural
    ("a man playing bagpipes", {"man", "bagpipes"}),
    ("mashed potatoes", {"potato"}),
    ("a dogma about hydrants", set()),
    ("", set()),
])
def test_mentions(caption, expected):
  assert MATCHER.mentions(caption) == expected


def test_a_surface_form_naming_two_concepts_is_an_error():
  with pytest.raises(ValueError, match="'bus' names both"):
    concepts.ConceptMatcher([concepts.Concept("bus"), concepts.Concept("coach", ("bus",))])


def test_concept_list_file_and_references(tmp_path):
  path = tmp_path / "classes.txt"
  path.write_text("# nocaps out-of-domain classes\nbagpipes\tbagpipe\nhot dog\n\n")
  listed = concepts.load_concept_list(str(path))
  assert listed == [concepts.Concept("bagpipes", ("bagpipe",)), concepts.Concept("hot dog")]
  matcher = concepts.ConceptMatcher(listed)
  refs = {"1": ["a man plays a bagpipe", "bagpipes on a hill", "a hot dog"], "2": ["a cat"]}
  assert concepts.image_concepts_from_references(refs, matcher) == {
      "1": {"bagpipes", "hot dog"}, "2": set()}
  assert concepts.image_concepts_from_references(refs, matcher, min_mentions=2) == {
      "1": {"bagpipes"}, "2": set()}
