"""The curation pipeline graph (Apache Beam; any runner).

  raw shards -> ReadRecords ((file, line), kind, payload)
             -> ParseFn (one line / row -> Candidate, or a rejection)
             -> GroupByKey(id) -> FirstOfIdFn (first by (file, line); later
                records of the id rejected as input/duplicate_id)
             -> FilterFn (exclusion, image, surface text, image-text)
             -> BatchElements -> NlpFn (spaCy batched; POS checks; transforms)
             -> token counts (per bundle, then CombinePerKey) -> rare-token set
             -> RareWordFn (rare set as a side input) -> kept shards
  every rejection -> rejects shards (id, reason, source, detail) and counts.json

counts.json holds {"input": n, "kept": n, "rejected/<reason>": n,
"noted/<policy>": n, ...}, computed inside the pipeline (so exact on every
runner); run.py checks that it reconciles and prints it as a table.
"""
import json
import os

import apache_beam as beam
import ml_collections

from cc12m_jax.curation import dofns
from cc12m_jax.curation import shards as io_lib


def _summary(pairs):
  counts = {}
  for key, value in pairs:
    counts[key] = counts.get(key, 0) + value
  return json.dumps(dict(sorted(counts.items())), indent=1)


def _rare_tokens(records, min_count: int):
  return (records
          | "BundleTokenCounts" >> beam.ParDo(dofns.BundleTokenCountFn())
          | "SumTokenCounts" >> beam.CombinePerKey(sum)
          | "KeepRare" >> beam.Filter(lambda kv, m=min_count: kv[1] < m)
          | "RareToken" >> beam.Keys()
          | "RareSet" >> beam.combiners.ToSet()
          | "Freeze" >> beam.Map(frozenset))


def _exclusion_keys(element):
  record = io_lib.exclusion_record(element)
  return dofns.exclusion_keys(record) if record is not None else []


def build(p: beam.Pipeline, config: ml_collections.ConfigDict) -> dict[str, beam.PCollection]:
  """Adds the curation graph to `p`; returns 'raw', 'kept', 'rejected', 'noted' PCollections.

  'rejected' holds (reason, JSON line) pairs, 'noted' the note names.
  """
  raw = p | "Read" >> io_lib.ReadRecords(config.input, config.input_format)
  parsed = raw | "Parse" >> beam.ParDo(dofns.ParseFn()).with_outputs(
      dofns.REJECTED, main="ok")
  unique = (parsed.ok
            | "KeyById" >> beam.Map(lambda c: (c["id"], c))
            | "GroupById" >> beam.GroupByKey()
            | "FirstOfId" >> beam.ParDo(dofns.FirstOfIdFn()).with_outputs(
                dofns.REJECTED, main="ok"))
  filter_outputs = (dofns.REJECTED, dofns.NOTED)
  if config.exclude:
    excluded = (p | "ReadExclude" >> io_lib.ReadRecords(config.exclude, "auto")
                | "ExclusionKeys" >> beam.FlatMap(_exclusion_keys)
                | "ExclusionSet" >> beam.combiners.ToSet()
                | "FreezeExclusion" >> beam.Map(frozenset))
    filtered = unique.ok | "Filter" >> beam.ParDo(
        dofns.FilterFn(config), beam.pvalue.AsSingleton(excluded)).with_outputs(
            *filter_outputs, main="ok")
  else:
    filtered = unique.ok | "Filter" >> beam.ParDo(dofns.FilterFn(config)).with_outputs(
        *filter_outputs, main="ok")
  batch = config.nlp.batch_size
  analysed = (filtered.ok
              | "Batch" >> beam.BatchElements(min_batch_size=batch, max_batch_size=batch)
              | "Nlp" >> beam.ParDo(dofns.NlpFn(config)).with_outputs(dofns.REJECTED, main="ok"))
  if config.text.min_token_count > 0:
    rare = _rare_tokens(analysed.ok, config.text.min_token_count)
  else:
    rare = p | "NoRareTokens" >> beam.Create([frozenset()])
  final = analysed.ok | "RareWords" >> beam.ParDo(
      dofns.RareWordFn(), beam.pvalue.AsSingleton(rare)).with_outputs(dofns.REJECTED, main="ok")
  rejected = ((parsed[dofns.REJECTED], unique[dofns.REJECTED], filtered[dofns.REJECTED],
               analysed[dofns.REJECTED], final[dofns.REJECTED])
              | "AllRejected" >> beam.Flatten())
  return {"raw": raw, "kept": final.ok, "rejected": rejected,
          "noted": filtered[dofns.NOTED]}


def build_and_write(p: beam.Pipeline, config: ml_collections.ConfigDict) -> None:
  """build() plus the kept shards, the rejects shards and counts.json."""
  out = build(p, config)
  out["kept"] | "WriteKept" >> io_lib.WriteKept(
      config.output_dir, config.output_format, config.num_output_shards)
  if config.write_rejects:
    (out["rejected"]
     | "RejectLine" >> beam.MapTuple(lambda _, line: line)
     | "WriteRejects" >> beam.io.WriteToText(
         os.path.join(config.output_dir, io_lib.REJECTS_PREFIX), file_name_suffix=".jsonl",
         num_shards=config.num_output_shards))
  counts = (
      (out["raw"] | "CountInput" >> beam.combiners.Count.Globally()
       | "KeyInput" >> beam.Map(lambda n: ("input", n)),
       out["kept"] | "CountKept" >> beam.combiners.Count.Globally()
       | "KeyKept" >> beam.Map(lambda n: ("kept", n)),
       out["rejected"] | "Reason" >> beam.MapTuple(lambda reason, _: "rejected/" + reason)
       | "CountReasons" >> beam.combiners.Count.PerElement(),
       out["noted"] | "Note" >> beam.Map(lambda note: "noted/" + note)
       | "CountNotes" >> beam.combiners.Count.PerElement())
      | "AllCounts" >> beam.Flatten()
      | "CountList" >> beam.combiners.ToList()
      | "Summary" >> beam.Map(_summary))
  counts | "WriteCounts" >> beam.io.WriteToText(
      os.path.join(config.output_dir, io_lib.COUNTS_FILE), num_shards=1,
      shard_name_template="")
