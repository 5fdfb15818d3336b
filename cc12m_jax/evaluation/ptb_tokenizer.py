"""COCO-caption PTB tokenization that works from a read-only install.

pycocoevalcap's `PTBTokenizer.tokenize` writes its temporary input file
*inside its own package directory*, which fails when site-packages is
read-only. This module runs the very same bundled Stanford CoreNLP 3.4.1 jar
with the same options (`-preserveLines -lowerCase`) on a temporary file in a
fresh temporary directory, then drops the same punctuation tokens, so the
tokens are identical to the official tool's. Two additions, both checked:
`-encoding UTF-8` (the official call relies on the platform default) and a
line-count check, so a caption can never be silently paired with another
image's tokens.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Hashable, Mapping, Sequence

# Exactly pycocoevalcap.tokenizer.ptbtokenizer.PUNCTUATIONS.
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-",
                          "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...",
                          ";"])


def pycocoevalcap_dir() -> str:
  """Directory of the installed pycocoevalcap package."""
  import pycocoevalcap  # namespace package: no __file__
  return list(pycocoevalcap.__path__)[0]


def corenlp_jar() -> str:
  return os.path.join(pycocoevalcap_dir(), "tokenizer",
                      "stanford-corenlp-3.4.1.jar")


def find_java() -> str | None:
  """The java executable: $JAVA, else `java` on PATH; None when missing."""
  java = os.environ.get("JAVA") or shutil.which("java")
  return java if java and os.access(java, os.X_OK) else None


def java_unavailable_reason() -> str | None:
  """None when Java runs; otherwise a short reason for reports."""
  java = find_java()
  if java is None:
    return "java not found (set $JAVA or put java on PATH)"
  try:
    proc = subprocess.run([java, "-version"], capture_output=True, timeout=60)
  except (OSError, subprocess.TimeoutExpired) as err:
    return f"java at {java} does not run: {err}"
  if proc.returncode != 0:
    return f"java at {java} exited with {proc.returncode}"
  return None


class PTBTokenizer:
  """Drop-in for pycocoevalcap's PTBTokenizer (same input/output shape)."""

  def __init__(self, java: str | None = None):
    self.java = java or find_java()
    if self.java is None:
      raise RuntimeError(
          "PTB tokenization needs Java to run the bundled Stanford CoreNLP "
          "jar: " + (java_unavailable_reason() or "java not found"))
    self.jar = corenlp_jar()
    if not os.path.exists(self.jar):
      raise RuntimeError(f"Stanford CoreNLP jar missing: {self.jar}")

  def tokenize_lines(self, sentences: Sequence[str]) -> list[str]:
    """Tokenises each sentence; returns space-joined tokens, punctuation out."""
    if not sentences:
      return []
    lines = [s.replace("\r", " ").replace("\n", " ") for s in sentences]
    with tempfile.TemporaryDirectory(prefix="ptb_tokenize_") as tmp:
      path = os.path.join(tmp, "captions.txt")
      with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
      cmd = [self.java, "-cp", self.jar,
             "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
             "-lowerCase", "-encoding", "UTF-8", path]
      proc = subprocess.run(cmd, cwd=tmp, capture_output=True)
    if proc.returncode != 0:
      raise RuntimeError(f"PTBTokenizer failed ({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    out = proc.stdout.decode("utf-8").split("\n")
    if len(out) == len(lines) + 1 and out[-1] == "":
      out = out[:-1]
    if len(out) != len(lines):
      raise RuntimeError(f"PTBTokenizer returned {len(out)} lines for "
                         f"{len(lines)} captions")
    return [" ".join(w for w in line.rstrip().split(" ")
                     if w not in PUNCTUATIONS) for line in out]

  def tokenize(self, captions_for_image: Mapping[Hashable, Sequence[dict]]
               ) -> dict[Hashable, list[str]]:
    """{image: [{'caption': str}, ...]} -> {image: [tokenized str, ...]}."""
    keys = [k for k, caps in captions_for_image.items() for _ in caps]
    sentences = [c["caption"] for caps in captions_for_image.values()
                 for c in caps]
    result: dict[Hashable, list[str]] = {k: [] for k in captions_for_image}
    for k, line in zip(keys, self.tokenize_lines(sentences)):
      result[k].append(line)
    return result
