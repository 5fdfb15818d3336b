"""Caption metrics from pycocoevalcap, called scorer by scorer.

`COCOEvalCap.evaluate()` is never used: it always builds SPICE, whose
constructor downloads Stanford CoreNLP at run time. Here each scorer is
called on its own, on PTB-tokenised text (see ptb_tokenizer.py):

  BLEU-1..4  corpus BLEU (pycocoevalcap Bleu(4), 'closest' ref length)
  METEOR     METEOR 1.5 (pycocoevalcap Meteor; Java)
  ROUGE-L    mean per-image ROUGE-L (beta 1.2)
  CIDEr      pycocoevalcap's Cider, i.e. CIDEr-D (n-grams 1..4, clipped
             counts, Gaussian length penalty sigma 6, x10), the metric COCO
             and nocaps report as "CIDEr"; document frequencies come from
             the references of the images scored together
  SPICE      only when Stanford CoreNLP 3.6.0 jars sit in pycocoevalcap's
             spice/lib and Java runs SPICE 1.0; otherwise "unavailable"
             with the reason. Never a made-up number.

Scores are returned as pycocoevalcap returns them (fractions: CIDEr 0.9 is
the "90" of papers).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Hashable, Mapping, Sequence

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge

from cc12m_jax.evaluation import ptb_tokenizer

BLEU_NAMES = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4")
ALL_METRICS = BLEU_NAMES + ("METEOR", "ROUGE-L", "CIDEr", "SPICE")
DEFAULT_METRICS = ALL_METRICS

Tokenized = Mapping[Hashable, Sequence[str]]
_SPACE_RUNS = re.compile(" {2,}")


def _check_pair(gts: Tokenized, res: Tokenized) -> list[Hashable]:
  if set(gts) != set(res):
    only_gts = sorted(map(str, set(gts) - set(res)))[:5]
    only_res = sorted(map(str, set(res) - set(gts)))[:5]
    raise ValueError(f"references and predictions cover different images: "
                     f"only in references {only_gts}, only in predictions "
                     f"{only_res}")
  for k in gts:
    if len(res[k]) != 1:
      raise ValueError(f"image {k!r}: expected exactly one prediction, got "
                       f"{len(res[k])}")
    if not gts[k]:
      raise ValueError(f"image {k!r}: no reference captions")
  return list(gts)


def _as_lists(d: Tokenized, keys) -> dict:
  return {k: list(d[k]) for k in keys}


def bleu(gts: Tokenized, res: Tokenized) -> tuple[dict, dict]:
  keys = _check_pair(gts, res)
  score, scores = Bleu(4).compute_score(_as_lists(gts, keys),
                                        _as_lists(res, keys), verbose=0)
  corpus = {n: float(s) for n, s in zip(BLEU_NAMES, score)}
  per_image = {n: np.asarray(s, np.float64) for n, s in zip(BLEU_NAMES, scores)}
  return corpus, per_image


def rouge_l(gts: Tokenized, res: Tokenized) -> tuple[float, np.ndarray]:
  keys = _check_pair(gts, res)
  score, scores = Rouge().compute_score(_as_lists(gts, keys),
                                        _as_lists(res, keys))
  return float(score), np.asarray(scores, np.float64)


def cider_d(gts: Tokenized, res: Tokenized) -> tuple[float, np.ndarray]:
  """CIDEr-D with document frequencies over exactly these images."""
  keys = _check_pair(gts, res)
  score, scores = Cider().compute_score(_as_lists(gts, keys),
                                        _as_lists(res, keys))
  return float(score), np.asarray(scores, np.float64)


def meteor_unavailable_reason() -> str | None:
  if shutil.which("java") is None:
    return "java not found on PATH (pycocoevalcap's METEOR runs `java`)"
  return ptb_tokenizer.java_unavailable_reason()


class MeteorScorer:
  """One METEOR 1.5 Java process, reusable for several image sets.

  Use as a context manager; the process is stopped on exit. Starting the
  jar (it loads its paraphrase table) dominates METEOR's cost, so the
  per-domain and overall sets share one process.
  """

  def __enter__(self) -> "MeteorScorer":
    self._meteor = Meteor()
    return self

  def __exit__(self, *exc) -> None:
    proc = self._meteor.meteor_p
    if proc.stdin and not proc.stdin.closed:
      proc.stdin.close()
    proc.kill()
    proc.wait()

  def score(self, gts: Tokenized, res: Tokenized) -> tuple[float, np.ndarray]:
    """Corpus score (the jar's EVAL line) and per-image scores."""
    keys = _check_pair(gts, res)
    score, scores = self._meteor.compute_score(
        {k: [_meteor_text(c, f"image {k!r} reference {j}")
             for j, c in enumerate(gts[k])] for k in keys},
        {k: [_meteor_text(res[k][0], f"image {k!r} prediction")]
         for k in keys})
    return float(score), np.asarray(scores, np.float64)


def _meteor_text(caption: str, where: str) -> str:
  """A caption safe for the jar's line protocol ("SCORE ||| ref ||| hyp").

  A line break would split one request into two and desynchronise every
  later image's score (or hang the reader), so captions are normalised as
  for tokenization (PTB-tokenised text is unchanged by this). "|||" would
  split a reference into two; pycocoevalcap strips it from the hypothesis
  only, here it is stripped from references too.
  """
  text = ptb_tokenizer.caption_text(caption, where).replace("|||", " ")
  return _SPACE_RUNS.sub(" ", text).strip(" ")


def meteor(gts: Tokenized, res: Tokenized) -> tuple[float, np.ndarray]:
  """METEOR 1.5 on one image set (starts and stops its own process)."""
  with MeteorScorer() as scorer:
    return scorer.score(gts, res)


def spice_dir() -> str:
  return os.path.join(ptb_tokenizer.pycocoevalcap_dir(), "spice")


def spice_unavailable_reason() -> str | None:
  """None when SPICE can run; otherwise why not (no download is attempted)."""
  reason = ptb_tokenizer.java_unavailable_reason()
  if reason:
    return reason
  lib = os.path.join(spice_dir(), "lib")
  needed = ["stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar"]
  missing = [j for j in needed if not os.path.exists(os.path.join(lib, j))]
  if missing:
    return (f"Stanford CoreNLP jars missing from {lib}: {', '.join(missing)} "
            "(pycocoevalcap would download them; cc12m_jax never downloads "
            "at run time)")
  return None


def spice(gts: Tokenized, res: Tokenized) -> tuple[float, np.ndarray]:
  """SPICE F-scores, per image and mean; runs spice-1.0.jar in a temp dir.

  Takes untokenised captions (SPICE parses them itself). Raises
  RuntimeError, with the reason, when SPICE cannot run.
  """
  keys = _check_pair(gts, res)
  reason = spice_unavailable_reason()
  if reason:
    raise RuntimeError(f"SPICE unavailable: {reason}")
  java = ptb_tokenizer.find_java()
  jar = os.path.join(spice_dir(), "spice-1.0.jar")
  names = {k: f"img{i}" for i, k in enumerate(keys)}
  data = [{"image_id": names[k], "test": res[k][0], "refs": list(gts[k])}
          for k in keys]
  with tempfile.TemporaryDirectory(prefix="spice_") as tmp:
    in_path, out_path = os.path.join(tmp, "in.json"), os.path.join(tmp,
                                                                  "out.json")
    with open(in_path, "w") as f:
      json.dump(data, f)
    proc = subprocess.run([java, "-jar", "-Xmx8G", jar, in_path, "-out",
                           out_path, "-subset", "-silent"], cwd=tmp,
                          capture_output=True)
    if proc.returncode != 0 or not os.path.exists(out_path):
      raise RuntimeError("SPICE unavailable: spice-1.0.jar failed "
                         f"({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-1000:]}")
    with open(out_path) as f:
      results = {r["image_id"]: r for r in json.load(f)}
  scores = np.asarray([float(results[names[k]]["scores"]["All"]["f"])
                       for k in keys], np.float64)
  return float(np.mean(scores)), scores


def tokenize_pairs(references: Mapping[Hashable, Sequence[str]],
                   predictions: Mapping[Hashable, str],
                   tokenizer: ptb_tokenizer.PTBTokenizer | None = None
                   ) -> tuple[dict, dict]:
  """PTB-tokenises references and predictions in one Java call.

  Captions are normalised first (ptb_tokenizer.normalize_caption: line
  separators, control and format characters become spaces) and every output
  line is checked to belong to its caption; a caption that cannot be
  tokenised raises, naming its image, instead of shifting later captions
  onto other images.
  """
  tokenizer = tokenizer or ptb_tokenizer.PTBTokenizer()
  owners: list[tuple[str, Hashable]] = []
  names: list[str] = []
  sentences: list[str] = []
  for k, caps in references.items():
    if isinstance(caps, (str, bytes)):  # a bare string would be split into chars
      raise ValueError(f"image {k!r}: references must be a list of captions, "
                       f"got {type(caps).__name__}")
    for j, c in enumerate(caps):
      owners.append(("ref", k))
      names.append(f"image {k!r} reference {j}")
      sentences.append(c)
  for k, c in predictions.items():
    owners.append(("res", k))
    names.append(f"image {k!r} prediction")
    sentences.append(c)
  lines = tokenizer.tokenize_lines(sentences, names)
  if len(lines) != len(sentences):  # tokenize_lines checks; never zip blindly
    raise ptb_tokenizer.TokenizerMismatchError(
        f"{len(lines)} tokenized lines for {len(sentences)} captions")
  gts: dict = {k: [] for k in references}
  res: dict = {k: [] for k in predictions}
  for (side, k), line in zip(owners, lines):
    (gts if side == "ref" else res)[k].append(line)
  return gts, res


def score_tokenized(gts: Tokenized, res: Tokenized,
                    metrics: Sequence[str] = BLEU_NAMES + ("METEOR",
                                                           "ROUGE-L", "CIDEr"),
                    meteor_scorer: MeteorScorer | None = None,
                    ) -> dict[str, float]:
  """Corpus-level scores of the non-SPICE metrics on one image set."""
  unknown = set(metrics) - set(ALL_METRICS) - {"SPICE"}
  if unknown:
    raise ValueError(f"unknown metrics {sorted(unknown)}; known: "
                     f"{ALL_METRICS}")
  out: dict[str, float] = {}
  if any(m in BLEU_NAMES for m in metrics):
    corpus, _ = bleu(gts, res)
    out.update({m: corpus[m] for m in BLEU_NAMES if m in metrics})
  if "METEOR" in metrics:
    out["METEOR"] = (meteor_scorer.score(gts, res)[0] if meteor_scorer
                     else meteor(gts, res)[0])
  if "ROUGE-L" in metrics:
    out["ROUGE-L"] = rouge_l(gts, res)[0]
  if "CIDEr" in metrics:
    out["CIDEr"] = cider_d(gts, res)[0]
  return out
