"""Image ids of records, one rule per public format.

The join matches features, tags and captions by these ids, the input
pipeline's `exclude_ids_of` compares them across sources, and evaluation
matches them to reference files, so every format maps to the id that its
references and the usual feature releases already use:

  COCO captions JSON, nocaps       str(images[].id)            "391895"
  COCO Karpathy JSON               the file stem                "COCO_val2014_000000391895"
                                   (joined to features by str(cocoid), the
                                   key of COCO feature releases)
  Flickr30K Karpathy JSON          file name stem               "1000092795"
  Localized Narratives             the line's image_id          "391895" / "0a1b2c3d4e5f6789"
  curation's kept shards           the kept row's id
  CC3M / CC12M TSV (url, caption)  url_image_id(url)            16 hex digits
                                   (curation's own rule and TSV line reader)

Web datasets have no ids, so the id is derived from the URL: the same URL in
CC3M and CC12M gives the same id, which is what the paper's removal of CC3M
images from CC12M (`exclude_ids_of=cc3m`) needs. The function is curation's
(candidates.url_image_id), so curated pairs, imported TSVs and features
named by it all agree.
"""
from cc12m_jax.curation import candidates
from cc12m_jax.data import karpathy

URL_ID_HEX_DIGITS = candidates.URL_ID_HEX_DIGITS
# One rule for curation (url-only candidates, CC TSV rows) and the importers:
# 16 hex digits of SHA-1 of the URL as written, surrounding whitespace
# stripped (cc12m_jax/curation/candidates.py).
url_image_id = candidates.url_image_id

# '1000092795.jpg' -> '1000092795': the Karpathy reader's rule, by which
# captioning references and retrieval queries name images.
file_stem = karpathy.image_id_of
