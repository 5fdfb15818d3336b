"""Caption styles of the synthetic world (one function per source style).

Every style names what the scene shows with the concept's own words, so
captions are learnable from the region features; the styles differ the way
the real datasets do:
  coco_style   clean, short, one template sentence; the caller only passes
               in-domain scenes (COCO annotators see COCO classes).
  cc3m_style   web text after CC3M's transformations: named entities (brands,
               places, characters, person names) hypernymized, digits -> '#'.
  cc12m_style  raw alt-text: hashtags, brands, places, numbers, `<PERSON>`,
               boilerplate; longer; about a quarter loosely or not aligned.
"""
import numpy as np

from cc12m_jax.data.synthetic import world as world_lib

# Hypernyms whose members are "named entities" (CC3M hypernymizes them), and
# the word CC3M writes instead.
NAMED_ENTITY_HYPERNYMS = {"brand": "brand", "place": "city",
                          "character": "cartoon character"}


def _a(word: str) -> str:
  return ("an " if word[0] in "aeiou" else "a ") + word


def _pick(rng: np.random.Generator, options):
  return options[int(rng.integers(len(options)))]


def coco_style(world: world_lib.World, scene: world_lib.Scene,
               rng: np.random.Generator) -> str:
  """One clean COCO-style sentence."""
  names = []
  for inst in scene.instances:
    name = world.concepts[inst.concept].name
    if rng.random() < 0.4:
      name = f"{world_lib.COLORS[inst.color]} {name}"
    names.append(_a(name))
  place = world_lib.SCENES[scene.scene][1]
  if len(names) == 1:
    templates = ("{0} {p} .", "there is {0} {p} .", "{0} sitting {p} .",
                 "a close up of {0} {p} .", "a photo of {0} {p} .",
                 "{0} that is {p} .")
  elif len(names) == 2:
    templates = ("{0} and {1} {p} .", "{0} next to {1} {p} .",
                 "{0} with {1} {p} .", "there is {0} and {1} {p} .")
  else:
    templates = ("{0} , {1} and {2} {p} .", "{0} with {1} and {2} {p} .",
                 "{0} next to {1} and {2} {p} .")
  return _pick(rng, templates).format(*names, p=place)


def _cc3m_name(world: world_lib.World, concept: int) -> str:
  c = world.concepts[concept]
  return NAMED_ENTITY_HYPERNYMS.get(c.hypernym, c.name)


def cc3m_style(world: world_lib.World, scene: world_lib.Scene,
               rng: np.random.Generator) -> str:
  """A cleaned web caption: entities hypernymized, digits as '#'."""
  names = [_cc3m_name(world, i.concept) for i in scene.instances]
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
    # Names a concept that is not in the image (loosely related at best).
    other = int(rng.choice(len(world.concepts), p=world.frequencies))
    scene = world_lib.Scene([world_lib.Instance(other, 0)], scene.scene)
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
