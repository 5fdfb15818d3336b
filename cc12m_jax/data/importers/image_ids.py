"""Image ids of records, one rule per public format.

The join matches features, tags and captions by these ids, the input
pipeline's `exclude_ids_of` compares them across sources, and evaluation
matches them to reference files, so every format maps to the id that its
references and the usual feature releases already use:

  COCO captions JSON, nocaps       str(images[].id)            "391895"
  COCO Karpathy JSON               str(images[].cocoid), else the file stem
  Flickr30K Karpathy JSON          file name stem               "1000092795"
  Localized Narratives             the line's image_id          "391895" / "0a1b2c3d4e5f6789"
  curation's kept shards           the kept row's id
  CC3M / CC12M TSV (url, caption)  url_image_id(url)            16 hex digits

Web datasets have no ids, so the id is derived from the URL: the same URL in
CC3M and CC12M gives the same id, which is what the paper's removal of CC3M
images from CC12M (`exclude_ids_of=cc3m`) needs. Curation derives ids of
url-only candidates with this same function, so curated pairs, imported
TSVs and features named by it all agree.
"""
import hashlib
import os

URL_ID_HEX_DIGITS = 16


def url_image_id(url: str) -> str:
  """The image id of a web image: the first 16 hex digits of SHA-1(url).

  The URL is taken exactly as written, apart from surrounding whitespace
  (no scheme or case folding: two spellings of a URL may be two files).
  64 bits: among 15M URLs a collision has probability ~6e-6, and the join
  reports one as a duplicate id rather than merging two images silently.
  """
  digest = hashlib.sha1(url.strip().encode("utf-8")).hexdigest()
  return digest[:URL_ID_HEX_DIGITS]


def file_stem(filename: str) -> str:
  """'1000092795.jpg' -> '1000092795': Flickr30K's ids, as the retrieval
  evaluation names images (its Karpathy reader's image_id_of)."""
  return os.path.splitext(os.path.basename(filename))[0]
