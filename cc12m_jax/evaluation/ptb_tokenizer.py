r"""COCO-caption PTB tokenization that works from a read-only install.

pycocoevalcap's `PTBTokenizer.tokenize` writes its temporary input file
*inside its own package directory*, which fails when site-packages is
read-only. This module runs the very same bundled Stanford CoreNLP 3.4.1 jar
with the same options (`-preserveLines -lowerCase`) on a temporary file in a
fresh temporary directory, then drops the same punctuation tokens, so the
tokens are identical to the official tool's for every caption free of the
characters below. It adds `-encoding UTF-8` (the official call relies on the
platform default) and two safeguards that keep every caption's tokens with
its own image (the official wrapper pairs output lines with images by
position, so one caption that becomes two lines silently shifts every later
caption onto the wrong image):
  * `normalize_caption`: every character Python's `str.splitlines` splits on
    and every Unicode control, format, line- or paragraph-separator character
    (categories Cc, Cf, Zl, Zp) becomes a space before Java sees the text.
    CoreNLP breaks lines at U+2028, U+2029, \v and \f too; without this a
    caption holding one of them became two output lines.
  * a sentinel line after every caption: the output must hold exactly one line
    between consecutive sentinels, else `TokenizerMismatchError` names the
    image whose caption broke the pairing. Lines are tokenized independently,
    so the sentinels do not change any caption's tokens.
A caption that is not valid text (bytes that are not UTF-8, a lone surrogate,
a non-string) is a `ValueError` naming its image.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from typing import Any, Hashable, Mapping, Sequence

import pycocoevalcap

# Exactly pycocoevalcap.tokenizer.ptbtokenizer.PUNCTUATIONS.
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-",
                          "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...",
                          ";"])

# Between captions in the Java input; a plain lower-case word, so PTB keeps
# it as one token on its own line.
_SENTINEL = "zzptbcaptionsentinel"
_SURROGATE = re.compile("[\ud800-\udfff]")


class TokenizerMismatchError(RuntimeError):
  """The tokenizer's output lines do not pair one-to-one with its captions."""


@functools.lru_cache(maxsize=1)
def _blank_table() -> dict[int, str]:
  r"""str.translate table: code point -> ' ' for Cc, Cf, Zl and Zp (230 points).

  Every character str.splitlines splits on (\n \r \v \f \x1c-\x1e \x85
  U+2028 U+2029) is in one of these categories.
  """
  return {cp: " " for cp in range(sys.maxunicode + 1)
          if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Zl", "Zp")}


def normalize_caption(text: str) -> str:
  """Line/paragraph separators, control and format characters -> spaces."""
  return text.translate(_blank_table())


def caption_text(caption: Any, where: str) -> str:
  r"""`caption` as text fit for the tokenizer, or ValueError naming `where`.

  Bytes must be UTF-8. A lone surrogate (e.g. from JSON's "\ud800" or a
  surrogateescape decode) cannot be written as UTF-8: rather than guess a
  replacement, the caption is refused.
  """
  if isinstance(caption, bytes):
    try:
      caption = caption.decode("utf-8")
    except UnicodeDecodeError as err:
      raise ValueError(f"{where}: caption is not valid UTF-8 ({err})") from None
  if not isinstance(caption, str):
    raise ValueError(f"{where}: caption is not a string: {caption!r:.80}")
  if _SURROGATE.search(caption):
    raise ValueError(f"{where}: caption holds a lone surrogate (not valid "
                     f"Unicode text): {caption!r:.80}")
  return normalize_caption(caption)


def pycocoevalcap_dir() -> str:
  """Directory of the installed pycocoevalcap package (a namespace package: no __file__)."""
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

  def tokenize_lines(self, sentences: Sequence[Any],
                     names: Sequence[str] | None = None) -> list[str]:
    """Tokenises each sentence; returns space-joined tokens, punctuation out.

    `names[i]` says where sentence i comes from (e.g. "image '42' caption 1")
    in error messages; by default its index.
    """
    if not sentences:
      return []
    if names is None:
      names = [f"caption {i}" for i in range(len(sentences))]
    lines = [caption_text(s, name) for s, name in zip(sentences, names)]
    with tempfile.TemporaryDirectory(prefix="ptb_tokenize_") as tmp:
      path = os.path.join(tmp, "captions.txt")
      with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
          f.write(line + "\n" + _SENTINEL + "\n")
      cmd = [self.java, "-cp", self.jar,
             "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
             "-lowerCase", "-encoding", "UTF-8", path]
      proc = subprocess.run(cmd, cwd=tmp, capture_output=True)
    if proc.returncode != 0:
      raise RuntimeError(f"PTBTokenizer failed ({proc.returncode}): "
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    try:
      stdout = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as err:
      raise TokenizerMismatchError(f"PTBTokenizer wrote invalid UTF-8: {err}"
                                   ) from None
    out = self._pair(stdout, lines, names)
    return [" ".join(w for w in line.rstrip().split(" ")
                     if w not in PUNCTUATIONS) for line in out]

  @staticmethod
  def _pair(stdout: str, lines: Sequence[str],
            names: Sequence[str]) -> list[str]:
    """Caption i's output is line 2i; line 2i+1 must be the sentinel."""
    out = stdout.split("\n")
    # N captions + N sentinels, each ended by "\n": 2N lines and a last "".
    for i, name in enumerate(names):
      pair = out[2 * i:2 * i + 2]
      if len(pair) < 2 or pair[1].strip() != _SENTINEL:
        raise TokenizerMismatchError(
            f"PTBTokenizer output lost its pairing with the captions at "
            f"{name} ({lines[i]!r:.120}): expected its tokens and then the "
            f"sentinel line, got {pair!r:.200}. Nothing is scored rather "
            "than scoring captions against another image's")
    if len(out) != 2 * len(lines) + 1 or out[-1] != "":
      raise TokenizerMismatchError(
          f"PTBTokenizer returned {len(out) - 1} lines for {len(lines)} "
          "captions and as many sentinel lines")
    return out[0:2 * len(lines):2]

  def tokenize(self, captions_for_image: Mapping[Hashable, Sequence[dict]]
               ) -> dict[Hashable, list[str]]:
    """{image: [{'caption': str}, ...]} -> {image: [tokenized str, ...]}."""
    keys = [k for k, caps in captions_for_image.items() for _ in caps]
    names = [f"image {k!r} caption {j}"
             for k, caps in captions_for_image.items() for j in range(len(caps))]
    sentences = [c["caption"] for caps in captions_for_image.values()
                 for c in caps]
    result: dict[Hashable, list[str]] = {k: [] for k in captions_for_image}
    lines = self.tokenize_lines(sentences, names)
    if len(lines) != len(keys):  # _pair guarantees it; never zip silently
      raise TokenizerMismatchError(f"{len(lines)} tokenized lines for "
                                   f"{len(keys)} captions")
    for k, line in zip(keys, lines):
      result[k].append(line)
    return result
