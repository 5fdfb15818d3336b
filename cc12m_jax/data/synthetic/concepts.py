"""Concept inventory of the synthetic long-tail world.

A concept is a visual thing a caption can name ("banana", "accordion"). The
inventory mirrors the nocaps set-up:

  in-domain    the ~80 COCO classes (real COCO category names);
  near-domain  novel concepts under hypernyms COCO also covers (a new fruit,
               a new animal): seen in web data, never in COCO captions;
  out-domain   novel object concepts under hypernyms COCO does not cover at
               all (instruments, plants, buildings, ...);
  web-only     named entities (brands, places, characters): web alt-text
               names them and CC3M-style captions write their hypernym, but
               they are no nocaps class, because nocaps annotates Open Images
               object classes. No evaluation image is drawn around them.

Frequencies are Zipfian: COCO concepts occupy the head of the distribution
(they are common on the web too) and the novel ones the long tail, so a source
with 4x the pairs (CC12M) sees many more tail concepts than a small one (CC3M).

`build_inventory(num_concepts, seed)` is deterministic: the same arguments give
the same list (same names, order, frequencies) on every machine.
"""
import dataclasses

import numpy as np

IN_DOMAIN = "in-domain"
NEAR_DOMAIN = "near-domain"
OUT_DOMAIN = "out-domain"
DOMAINS = (IN_DOMAIN, NEAR_DOMAIN, OUT_DOMAIN)  # nocaps' three image domains
WEB_ONLY = "web-only"
CONCEPT_DOMAINS = DOMAINS + (WEB_ONLY,)

# Hypernyms whose members are named entities, and the word a CC3M-style
# caption writes instead (CC3M hypernymizes proper names). Table 9 counts
# CC3M instances of every nocaps out-of-domain class (median 462), so proper
# names, which CC3M never writes, cannot be nocaps classes here either.
NAMED_ENTITY_HYPERNYMS = {"brand": "brand", "place": "city",
                          "character": "cartoon character"}


@dataclasses.dataclass(frozen=True)
class Concept:
  name: str        # lowercase word or short phrase, as it appears in captions
  hypernym: str    # e.g. "fruit"; what CC3M-style hypernymization writes
  frequency: float  # probability of the concept in web images (sums to 1)
  domain: str      # one of CONCEPT_DOMAINS


# The 80 COCO detection classes (person is the only one renamed: web captions
# replace person names by <PERSON>, so the class is written "man" here),
# grouped under the hypernym a CC3M-style caption would use for them.
_COCO_CONCEPTS: dict[str, tuple[str, ...]] = {
    "person": ("man",),
    "vehicle": ("bicycle", "car", "motorcycle", "airplane", "bus", "train",
                "truck", "boat"),
    "street object": ("traffic light", "fire hydrant", "stop sign",
                      "parking meter", "bench"),
    "animal": ("bird", "cat", "dog", "horse", "sheep", "cow", "elephant",
               "bear", "zebra", "giraffe"),
    "accessory": ("backpack", "umbrella", "handbag", "tie", "suitcase"),
    "sport": ("frisbee", "skis", "snowboard", "ball", "kite", "baseball bat",
              "baseball glove", "skateboard", "surfboard", "tennis racket"),
    "kitchenware": ("bottle", "wine glass", "cup", "fork", "knife", "spoon",
                    "bowl"),
    "fruit": ("banana", "apple", "orange"),
    "food": ("sandwich", "broccoli", "carrot", "hot dog", "pizza", "donut",
             "cake"),
    "furniture": ("chair", "couch", "potted plant", "bed", "dining table",
                  "toilet"),
    "electronics": ("tv", "laptop", "mouse", "remote", "keyboard",
                    "cell phone"),
    "appliance": ("microwave", "oven", "toaster", "sink", "refrigerator"),
    "household object": ("book", "clock", "vase", "scissors", "teddy bear",
                         "hair drier", "toothbrush"),
}

# Novel concepts with real names, by hypernym. Hypernyms that also appear in
# _COCO_CONCEPTS give near-domain concepts, NAMED_ENTITY_HYPERNYMS web-only
# ones, the others out-domain ones.
_NOVEL_CONCEPTS: dict[str, tuple[str, ...]] = {
    "fruit": ("mangosteen", "lychee", "durian", "papaya", "kiwi", "pomegranate",
              "grape", "lemon", "mango", "pineapple", "strawberry", "peach",
              "pear", "watermelon", "fig", "cherry", "coconut", "plum"),
    "animal": ("jellyfish", "tortoise", "kangaroo", "koala", "panda", "lion",
               "tiger", "camel", "otter", "squirrel", "rabbit", "goat", "deer",
               "fox", "wolf", "crab", "lobster", "starfish", "octopus", "seal",
               "dolphin", "shark", "frog", "snail"),
    "vehicle": ("tram", "tractor", "helicopter", "canoe", "ambulance", "taxi",
                "scooter", "limousine", "submarine", "gondola", "rickshaw",
                "snowmobile"),
    "food": ("sushi", "burrito", "pancake", "croissant", "waffle", "taco",
             "dumpling", "pretzel", "bagel", "muffin", "omelette", "lasagna"),
    "sport": ("sumo", "fencing", "archery", "rugby", "polo", "bowling",
              "curling", "karate", "lacrosse", "badminton"),
    "furniture": ("wardrobe", "bookcase", "hammock", "stool", "cradle",
                  "dresser"),
    "kitchenware": ("teapot", "kettle", "wok", "ladle", "whisk", "cutting board"),
    "accessory": ("wallet", "sunglasses", "scarf", "bracelet", "necklace"),
    "electronics": ("camera", "headphones", "tablet", "printer", "drone"),
    "instrument": ("accordion", "bagpipes", "violin", "cello", "harp", "banjo",
                   "trumpet", "saxophone", "flute", "drum", "piano", "ukulele",
                   "harmonica", "tuba", "xylophone", "guitar"),
    "brand": ("pokemon", "lego", "chevrolet", "nike", "adidas", "rolex",
              "starbucks", "ferrari", "gucci", "toyota", "nintendo", "ikea"),
    "place": ("zanzibar", "tokyo", "paris", "venice", "kyoto", "iceland",
              "sahara", "patagonia", "santorini", "bali", "havana", "petra"),
    "plant": ("cactus", "sunflower", "orchid", "tulip", "bamboo", "fern",
              "lavender", "bonsai", "lotus", "maple"),
    "building": ("lighthouse", "pagoda", "windmill", "castle", "cathedral",
                 "igloo", "skyscraper", "temple", "barn", "mosque"),
    "clothing": ("kimono", "sombrero", "tuxedo", "poncho", "sari", "beret"),
    "tool": ("hammer", "wrench", "chainsaw", "shovel", "ladder", "anvil"),
    "character": ("luffy", "pikachu", "batman", "snoopy", "mickey"),
}

# Syllables for generated tail names once the real names are used up; each
# generated name is a pronounceable lowercase word such as "talorin".
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v",
           "z", "br", "dr", "kr", "tr", "st", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "n", "r", "s", "l", "m", "x")

_NUM_IN_DOMAIN = sum(len(v) for v in _COCO_CONCEPTS.values())


def generated_name(rng: np.random.Generator, taken: set[str]) -> str:
  """A new pronounceable lowercase word (>= 5 letters), added to `taken`."""
  while True:
    parts = []
    for _ in range(rng.integers(2, 4)):
      parts.append(_ONSETS[rng.integers(len(_ONSETS))] +
                   _VOWELS[rng.integers(len(_VOWELS))])
    name = "".join(parts) + _CODAS[rng.integers(len(_CODAS))]
    if name not in taken and len(name) >= 5:
      taken.add(name)
      return name


def build_inventory(num_concepts: int = 600, seed: int = 0, *,
                    zipf_exponent: float = 1.0) -> list[Concept]:
  """Returns `num_concepts` concepts, most frequent first.

  The first ~80 are the COCO classes (in-domain; fewer if num_concepts < 160
  so that every domain keeps concepts). The rest alternate over the novel
  hypernyms; names come from the real lists above, then generated words.
  """
  if num_concepts < 12:
    raise ValueError(f"num_concepts must be >= 12, got {num_concepts}")
  rng = np.random.default_rng(seed)
  coco = [(name, hyp) for hyp, names in _COCO_CONCEPTS.items() for name in names]
  num_in = min(_NUM_IN_DOMAIN, num_concepts // 2)
  order = rng.permutation(len(coco))[:num_in]
  coco = [coco[i] for i in sorted(order)]
  taken = {name for name, _ in coco}

  # Novel concepts: round-robin over hypernyms (shuffled real names first),
  # so every hypernym, and both novel domains, stay populated at any size.
  queues = {}
  for hyp in sorted(_NOVEL_CONCEPTS):
    names = list(_NOVEL_CONCEPTS[hyp])
    queues[hyp] = [names[i] for i in rng.permutation(len(names))]
  hypernyms = sorted(_NOVEL_CONCEPTS)
  novel = []
  i = 0
  while len(novel) < num_concepts - num_in:
    hyp = hypernyms[i % len(hypernyms)]
    i += 1
    if queues[hyp]:
      name = queues[hyp].pop(0)
      if name in taken:  # a real name listed twice
        continue
      taken.add(name)
    else:
      name = generated_name(rng, taken)
    novel.append((name, hyp))

  # Zipfian ranks: COCO concepts take the head (shuffled among themselves),
  # novel concepts the tail (shuffled), as on the web.
  head = [coco[i] for i in rng.permutation(len(coco))]
  tail = [novel[i] for i in rng.permutation(len(novel))]
  ranked = head + tail
  weights = 1.0 / np.arange(1, len(ranked) + 1) ** zipf_exponent
  weights = weights / weights.sum()
  coco_hypernyms = set(_COCO_CONCEPTS)
  concepts = []
  for (name, hyp), freq in zip(ranked, weights):
    if (name, hyp) in coco:
      domain = IN_DOMAIN
    elif hyp in NAMED_ENTITY_HYPERNYMS:
      domain = WEB_ONLY
    elif hyp in coco_hypernyms:
      domain = NEAR_DOMAIN
    else:
      domain = OUT_DOMAIN
    concepts.append(Concept(name=name, hypernym=hyp, frequency=float(freq),
                            domain=domain))
  return concepts


def image_domain(concepts: list[Concept]) -> str:
  """nocaps domain of an image from the concepts it shows.

  in-domain: only COCO concepts; out-domain: only novel object concepts
  under hypernyms COCO lacks; near-domain: anything else (a mix, or novel
  concepts of COCO hypernyms). Web-only concepts are in no nocaps image.
  """
  domains = {c.domain for c in concepts}
  if domains == {IN_DOMAIN}:
    return IN_DOMAIN
  if domains == {OUT_DOMAIN}:
    return OUT_DOMAIN
  return NEAR_DOMAIN
