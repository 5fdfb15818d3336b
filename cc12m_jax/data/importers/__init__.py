"""Importers: public image-feature and caption formats -> feature records.

    python -m cc12m_jax.data.importers <format> --source=... --output_dir=... \
        --captions=... --features=... [--tags=...] [Beam flags]

An Apache Beam job (local by default; Dataflow / Flink / Spark by flags)
that reads region features (bottom-up TSV, VinVL TSV, .npz), tags (JSONL)
and captions (CC TSV, COCO / Karpathy JSON, nocaps, Flickr30K, Localized
Narratives, curation's kept shards), joins them by image id and writes
records, metadata.json, a report of counts and bad rows, and the vocabulary.
See docs/importers.md.

  image_ids.py   image id rules (url_image_id for web data)
  rows.py        row types, bad rows and their reasons
  textfiles.py   byte-range reading of line files, line numbers on demand
  regions.py     detector arrays -> record regions (16 most confident, boxes)
  bottomup.py    bottom-up / LXMERT / VinVL TSV rows
  npz.py         per-image .npz files
  tags.py        tags JSONL
  captions.py    caption formats
  readers.py     Beam reading transforms (ranges, files, strict mode)
  join.py        the per-image join and the shard writer
  pipeline.py    the job's graph
  run.py         the job, then metadata, report, vocabulary
  cli.py         the command line
"""
