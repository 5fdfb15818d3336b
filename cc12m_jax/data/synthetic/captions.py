"""Caption styles of the synthetic world (one function per source style).

Every style names what the scene shows with the concept's own words, so
captions are learnable from the region features; the styles differ the way
the real datasets do:
  coco_style   clean, short, one sentence; five annotators phrase one scene
               five ways (openers, adjectives, order, relations, several
               phrasings of each place), agreeing on the concept words.
  cc3m_style   web text after CC3M's transformations: named entities (brands,
               places, characters, person names) hypernymized, digits -> '#'.
  cc12m_style  raw alt-text: hashtags, brands, places, numbers, `<PERSON>`,
               boilerplate; about a quarter loosely or not aligned;
               web_context lengthens it with what else alt-text carries.
"""
import dataclasses

import numpy as np

from cc12m_jax.curation import words as words_lib
from cc12m_jax.data.synthetic import concepts as concepts_lib
from cc12m_jax.data.synthetic import world as world_lib

def _a(word: str) -> str:
  return ("an " if word[0] in "aeiou" else "a ") + word


def _pick(rng: np.random.Generator, options):
  return options[int(rng.integers(len(options)))]


# How COCO annotators vary one description: several phrasings of each scene
# (indexed like world_lib.SCENES), openers, poses and relations. Five people
# describing one photo agree on what it shows, not on the words around it,
# so references share the concept and scene words and little else.
_SCENE_PHRASES = (
    ("on the beach", "on a sandy beach", "near the ocean"),
    ("on the street", "on a city street", "along the road"),
    ("in a kitchen", "on a kitchen counter", "in the kitchen"),
    ("in a grassy field", "in a field", "on the grass"),
    ("in a living room", "on the living room floor", "inside a house"),
    ("in the park", "at a park", "in a public park"),
    ("in the forest", "among the trees", "in the woods"),
    ("in the city", "in a busy city", "downtown"),
    ("in the snow", "on snowy ground", "in the winter snow"),
    ("in a studio", "against a plain background", "on a white backdrop"),
    ("in a garden", "among the flowers", "in a backyard garden"),
    ("by the lake", "near a lake", "at the edge of a lake"),
)
_OPENERS = ("", "", "", "a picture of ", "a photo of ", "an image of ",
            "there is ", "close up of ", "a view of ", "this is ")
_POSES = ("sitting", "standing", "lying", "resting", "shown", "placed")
_SIZE_WORDS = ("small", "large", "little", "big")
_RELATIONS = ("and", "next to", "with", "near", "beside", "in front of")


def coco_style(world: world_lib.World, scene: world_lib.Scene,
               rng: np.random.Generator) -> str:
  """One clean COCO-style sentence, phrased as one of several annotators would."""
  names = []
  for inst in scene.instances:
    words = [world.concepts[inst.concept].name]
    if rng.random() < 0.4:
      words.insert(0, world_lib.COLORS[inst.color])
    if rng.random() < 0.15:
      words.insert(0, _pick(rng, _SIZE_WORDS))
    names.append(_a(" ".join(words)))
  order = rng.permutation(len(names)) if rng.random() < 0.5 else range(len(names))
  names = [names[i] for i in order]
  text = names[0]
  if len(names) == 2:
    text += f" {_pick(rng, _RELATIONS)} {names[1]}"
  elif len(names) == 3:
    text += f" , {names[1]} and {names[2]}"
  if rng.random() < 0.3:
    text += f" {_pick(rng, _POSES)}"
  if rng.random() < 0.85:
    text += f" {_pick(rng, _SCENE_PHRASES[scene.scene])}"
  opener = _pick(rng, _OPENERS)
  if opener.startswith("this is ") and len(names) > 1:
    opener = "there is "
  return f"{opener}{text} ."


def misnamed(world: world_lib.World, scene: world_lib.Scene,
             rng: np.random.Generator) -> world_lib.Scene:
  """What a misaligned caption describes: a concept drawn by the web's
  frequencies, not (or only by chance) one the image shows, in its place."""
  other = int(rng.choice(len(world.concepts), p=world.frequencies))
  return world_lib.Scene([world_lib.Instance(other, 0)], scene.scene)


def _cc3m_name(world: world_lib.World, concept: int) -> str:
  c = world.concepts[concept]
  return concepts_lib.NAMED_ENTITY_HYPERNYMS.get(c.hypernym, c.name)


def cc3m_style(world: world_lib.World, scene: world_lib.Scene,
               rng: np.random.Generator, *, hypernymize: bool = True) -> str:
  """A cleaned web caption: entities hypernymized, digits as '#'.

  hypernymize=False: the same draw with the entities' own names, the text
  CC3M's filters saw (its transformations run after them).
  """
  names = [_cc3m_name(world, i.concept) if hypernymize else world.concepts[i.concept].name
           for i in scene.instances]
  place = world_lib.SCENES[scene.scene][1]
  first = names[0]
  color = world_lib.COLORS[scene.instances[0].color]
  templates = (f"{_a(first)} {place}", f"{color} {first} {place}",
               f"actor posing with {_a(first)}",
               f"# {first} on display {place}",
               f"illustration of {_a(first)} {place}")
  text = _pick(rng, templates)
  if len(names) > 1:
    text += " with " + " and ".join(_a(n) for n in names[1:])
  return text


_BOILERPLATE = ("stock photo", "hd wallpaper", "free download", "for sale",
                "royalty free image", "high resolution", "buy online",
                "pin on my board", "best price")
_GENERIC = ("my new favorite thing !!", "click here to see more",
            "image may contain : text", "photo by <PERSON>",
            "the best weekend ever", "check out this amazing view")


def _hashtag(text: str) -> str:
  return "#" + text.replace(" ", "")


def cc12m_style(world: world_lib.World, scene: world_lib.Scene,
                rng: np.random.Generator, *,
                misaligned_fraction: float = 0.25) -> tuple[str, bool]:
  """A raw alt-text; returns (text, aligned)."""
  if rng.random() < misaligned_fraction:
    if rng.random() < 0.5:
      return _pick(rng, _GENERIC), False
    scene = misnamed(world, scene, rng)
    aligned = False
  else:
    aligned = True
  names = [world.concepts[i.concept].name for i in scene.instances]
  scene_name, place = world_lib.SCENES[scene.scene]
  color = world_lib.COLORS[scene.instances[0].color]
  year = int(rng.integers(1990, 2021))
  count = int(rng.integers(2, 13))
  first = names[0]
  templates = (
      f"{first.title()} {place} {_hashtag(first)} {_hashtag(color)} "
      f"{_hashtag(scene_name)}",
      f"<PERSON> with {_a(first)} {place} , {year}",
      f"{color} {first} {_pick(rng, _BOILERPLATE)} {year}",
      f"{count} {first} photos | {_pick(rng, _BOILERPLATE)}",
      f"<PERSON> and <PERSON> posing next to {_a(first)} {place}",
      f"{_a(color + ' ' + first).capitalize()} {place} - "
      f"{_pick(rng, _BOILERPLATE)} - image {int(rng.integers(100, 99999))}",
  )
  text = _pick(rng, templates)
  if len(names) > 1:
    text += " , " + " , ".join(names[1:])
    if rng.random() < 0.5:
      text += " " + " ".join(_hashtag(n) for n in names[1:])
  return text, aligned


# What a raw alt-text carries besides the name of what the photo shows (the
# paper's Figure 1: "#jellyfish #blue #ocean #pretty Sea Turtle Wallpaper"):
# tags about the picture and the poster's mood, titles and site or product
# words, handles, dates (CC12M keeps digits and time spans), boilerplate.
_MOOD_TAGS = ("pretty", "love", "beautiful", "cute", "amazing", "vintage",
              "summer", "travel", "art", "photography", "nature", "instagood")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july",
           "august", "september", "october", "november", "december")


@dataclasses.dataclass(frozen=True)
class WebVocabulary:
  """The web's own long tail of words (titles, sites, products, handles)."""
  words: tuple[str, ...]
  probs: np.ndarray  # f64 [len(words)], Zipfian

  def draw(self, rng: np.random.Generator, count: int) -> list[str]:
    """`count` words drawn by their frequencies."""
    return [self.words[j] for j in
            rng.choice(len(self.words), size=count, p=self.probs)]


def web_vocabulary(size: int, seed: int,
                   world: world_lib.World) -> WebVocabulary:
  """`size` generated words with Zipfian (exponent 1) frequencies, as word
  frequencies in text are; none is a concept's name, in any inflection the
  concept matcher accepts."""
  taken = {c.name for c in world.concepts}
  concept_stems = {words_lib.stem(t) for name in taken for t in name.split()}
  rng = np.random.default_rng([seed, 2])
  words = []
  while len(words) < size:
    word = concepts_lib.generated_name(rng, taken)
    if words_lib.stem(word) not in concept_stems:
      words.append(word)
  weights = 1.0 / np.arange(1, size + 1)
  return WebVocabulary(tuple(words), weights / weights.sum())


def web_context(world: world_lib.World, scene: world_lib.Scene,
                vocab: WebVocabulary, rng: np.random.Generator,
                mean_words: float) -> str:
  """Poisson(mean_words) words, rounded up to whole segments, of what else an
  alt-text says; names no concept, so concept counts per caption (Table 9)
  are the same with and without it."""
  target = int(rng.poisson(mean_words))
  segments, num_words = [], 0
  while num_words < target:
    kind = int(rng.integers(5))
    if kind == 0:    # a title, site or product name
      segment = " ".join(vocab.draw(rng, int(rng.integers(1, 4))))
    elif kind == 1:  # a handle
      segment = "@" + vocab.draw(rng, 1)[0]
    elif kind == 2:  # a tag about the picture or the mood
      first = scene.instances[0]
      segment = _hashtag(_pick(rng, (
          world_lib.COLORS[first.color], world_lib.SCENES[scene.scene][0],
          world.concepts[first.concept].hypernym, _pick(rng, _MOOD_TAGS))))
    elif kind == 3:  # a date
      segment = (f"{_pick(rng, _MONTHS)} {int(rng.integers(1, 29))} , "
                 f"{int(rng.integers(1990, 2021))}")
    else:
      segment = _pick(rng, _BOILERPLATE)
    segments.append(segment)
    num_words += len(segment.split())
  return " ".join(segments)
