"""Shared base for every cc12m_jax config.

Variant files (configs/cc3m.py, configs/cc12m.py, ...) start from `get_config()`
here and change only what truly differs between them. Every field that any
variant sets must exist here, so that a typo in `--config.a.b=v` is an error
naming the key (the returned ConfigDict is locked).

Sections:
  data      what records to read and how to batch them (cc12m_jax.data).
  model     network shape (cc12m_jax.models).
  optim     optimizer and learning-rate schedule (cc12m_jax.train.optim).
  train     loop length, logging, checkpointing (cc12m_jax.train.trainer).
  objectives masking rates and clusters of mlm / mass / moc (cc12m_jax.objectives).
  mesh      device mesh and logical-axis rules (cc12m_jax.sharding).
  decode    beam search / sampling (cc12m_jax.decoding).
  eval      evaluation sets and best-checkpoint selection (cc12m_jax.evaluation).
  synthetic the synthetic long-tail world (cc12m_jax.data.synthetic).
"""
import ml_collections


def data_config() -> ml_collections.ConfigDict:
  """Input pipeline settings; see docs/record_format.md and docs/architecture.md."""
  c = ml_collections.ConfigDict()
  # Root holding one sub-directory per source (shards + metadata.json) and
  # the subword vocabulary file.
  c.data_dir = "data/synthetic"
  c.vocab_path = ""  # '' means <data_dir>/vocab.txt
  # Training mixture: comma-separated source names (sub-directories of
  # data_dir) with matching comma-separated weights and sub-sampling fractions.
  # Strings keep `--config.data.train_sources=cc3m,cc12m` overrides simple.
  c.train_sources = "cc12m"
  c.train_weights = "1.0"
  c.train_fractions = "1.0"
  # Sources whose image ids are removed from every *other* training source
  # (the paper drops CC3M images from CC12M).
  c.exclude_ids_of = ""
  c.eval_sources = "nocaps_val"
  c.global_batch_size = 64
  c.eval_global_batch_size = 64
  c.max_caption_length = 36  # tokens, including EOS; 180 for long captions
  c.max_tag_tokens = 4       # subword tokens kept per tag
  c.shuffle_buffer = 10_000
  c.strict = False           # True: a bad record raises; False: skip + count
  c.num_parallel_reads = 4   # files interleaved at a time
  # How those files are read: 'parallel' (one tf.data thread per file: hides
  # the latency of remote storage such as gs://), 'sequential' (round-robin
  # on the pipeline's own thread: no hand-off cost, best for local disk on a
  # few cores), or 'auto' (parallel iff any file path has a scheme like gs://).
  c.read_parallelism = "auto"
  c.seed = 0
  # Records are parsed in chunks of this many, before the per-host batch is
  # formed: the parse + tokenize map has a fixed cost per op, which a larger
  # chunk spreads over more records, until the chunk no longer fits in the
  # CPU cache (docs/benchmarks.md, input pipeline).
  c.parse_batch_size = 512
  # Keep freed host memory for reuse instead of returning it to the kernel
  # (glibc mallopt; cc12m_jax/data/host_memory.py): otherwise every batch's
  # large feature buffers are page-faulted in afresh (docs/benchmarks.md).
  c.retain_host_memory = True
  return c


def model_config() -> ml_collections.ConfigDict:
  """Encoder-decoder shape (paper Appendix E.2).

  The notes give "E=512, H=1024, F=4H=4096, A=H/64=8", which is
  self-inconsistent (A=H/64 is 16 for H=1024). Section 4.2 says the model is
  "6 layers of hidden size 512 with 8 attention heads"; we follow that
  (width 512, 8 heads of 64) and use the standard MLP size 4 x 512 = 2048.
  Each number is a config value, so the other reading is one override away.
  """
  c = ml_collections.ConfigDict()
  c.vocab_size = 0          # 0: read from the vocabulary file at start-up
  c.feature_dim = 0         # 0: read D from the data's metadata.json
  c.emb_dim = 512           # E
  c.num_heads = 8           # A
  c.mlp_dim = 2048          # F
  c.num_encoder_layers = 6
  c.num_decoder_layers = 6
  c.input_dropout = 0.3     # dropout inside the input embedding MLPs
  c.dropout = 0.1           # transformer residual dropout
  c.attention_dropout = 0.1
  c.use_tags = True
  c.compute_dtype = "float32"  # "bfloat16" for bf16 compute, f32 params
  # Dual encoder (vlm) only.
  c.text_encoder_layers = 6
  c.projection_dim = 512
  c.temperature = 0.05
  c.learn_temperature = False
  c.symmetric_loss = False
  return c


def optim_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.optimizer = "adam"
  c.learning_rate = 3.2e-4
  c.warmup_steps = 20_000
  c.decay_rate = 0.95        # staircase: lr *= 0.95 every decay_steps
  c.decay_steps = 25_000
  c.grad_clip_norm = 1.0
  c.weight_decay = 0.0
  c.b1 = 0.9
  c.b2 = 0.98
  return c


def train_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  # "ic" (captioner), "vlm" (dual encoder), "mlm", "mass", "moc", or a
  # weighted sum such as "ic+0.1*moc" (cc12m_jax/objectives/registry.py,
  # docs/objectives.md); config.objectives holds the masked ones' settings.
  c.objective = "ic"
  c.num_train_steps = 2_000_000
  c.log_every_steps = 100
  c.checkpoint_every_steps = 5_000
  c.keep_checkpoints = 3
  c.eval_every_steps = 0    # 0: no periodic evaluation
  c.init_from = ""          # pre-trained checkpoint dir (fine-tuning)
  c.init_step = -1          # -1: latest step in init_from
  # True: parameters the checkpoint lacks (e.g. the decoder, fine-tuning an
  # mlm encoder for captioning) start fresh, and are logged; False: every
  # parameter must be in init_from. Shapes must match either way.
  c.init_partial = False
  c.seed = 0
  c.distributed = False     # call jax.distributed.initialize()
  c.async_checkpointing = True
  # Random bits for dropout: "rbg" (XLA RngBitGenerator: far cheaper bits
  # than JAX's threefry, deterministic for a fixed mesh, but the masks depend
  # on the sharding layout) or "threefry" (identical masks on every mesh).
  c.dropout_rng = "rbg"
  return c


def objectives_config() -> ml_collections.ConfigDict:
  """The masked objectives of Appendix D.2 (mlm, mass, moc); docs/objectives.md."""
  c = ml_collections.ConfigDict()
  # mlm: share r of the caption's words masked; mass: one span of r of them.
  c.text_mask_rate = 0.2
  # Of the masked words, BERT's 80% become [MASK], 10% a random word piece,
  # the rest stay as they are (mlm and mass alike).
  c.mask_token_prob = 0.8
  c.random_token_prob = 0.1
  # moc: share of each image's real regions whose features are zeroed and
  # whose cluster is predicted (UNITER's 15%).
  c.region_mask_rate = 0.15
  # moc: the k-means centroids f32 [C, D] (cc12m_jax/data/clusters.py);
  # '' = <data_dir>/<first train source>/centroids.npy.
  c.centroids = ""
  return c


def mesh_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.data = -1   # -1: all devices not used by the other axes
  c.fsdp = 1
  c.model = 1
  return c


def decode_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.method = "beam"   # "beam", "greedy" or "sample"
  c.beam_size = 5
  c.alpha = 0.6
  c.max_decode_len = 36
  c.temperature = 1.0
  c.top_k = 0
  c.top_p = 1.0
  return c


def eval_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  # Evaluator (cc12m_jax/evaluation/registry.py): '' = the objective's own
  # ('captioning' for ic, 'retrieval' for vlm).
  c.evaluator = ""
  c.references = ""          # COCO/nocaps/Karpathy JSON; '' means records' captions
  # Metric that picks the best checkpoint: '<source>/<metric>' (the source may
  # be left out when there is one eval source); '' = no selection.
  c.selection_metric = "out-domain/CIDEr"
  c.selection_mode = "max"   # "max" or "min" (cc12m_jax/core/selection.py)
  c.num_examples_to_show = 5
  # Metrics to compute (comma-separated); SPICE is reported "unavailable"
  # unless its Stanford CoreNLP jars are installed.
  c.metrics = "CIDEr,BLEU-1,BLEU-2,BLEU-3,BLEU-4,METEOR,ROUGE-L,SPICE"
  # Modes evaluate/predict: checkpoint to decode ('' means <workdir>) and its
  # step (-1: latest), or with select_checkpoint the kept checkpoint that
  # scores best on selection_metric (cc12m_jax/evaluation/modes.py).
  c.checkpoint_dir = ""
  c.checkpoint_step = -1
  c.select_checkpoint = False
  # With select_checkpoint: choose among the kept steps <= this one (0: all).
  # A fine-tuning's schedule does not depend on its length, so one long run
  # capped here is the shorter budget's run (the step-budget grid).
  c.selection_max_step = 0
  # The 'naming' evaluator (cc12m_jax/evaluation/naming_probe.py): the concepts
  # whose names compete ('' = the synthetic world of config.synthetic, or a
  # concept list file / 'synthetic:<num>:<seed>'), and the caption prefixes a
  # name is scored after (comma-separated; an empty entry is the start).
  c.naming_concepts = ""
  c.naming_prefixes = "a"
  return c


def synthetic_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  # How many concepts share the web's long tail. With the web sources' sizes
  # below, 450 put a median nocaps out-of-domain class at 52 CC12M-style and 8
  # CC3M-style mentions: Table 9's ratio of counts (6.5x against 6.7x) and of
  # densities per 1M captions (1.74x against 1.8x), at 8x Table 9's densities
  # (docs/synthetic_world.md, "Densities: why 450 concepts").
  c.num_concepts = 450
  c.feature_dim = 512
  # Storage dtype of global / region features (metadata.json records it):
  # float16 halves the bytes the input pipeline reads, checksums and copies
  # (docs/record_format.md); 'float32' keeps them exact.
  c.feature_dtype = "float16"
  # The web sources are the real CC3M and CC12M at 1/474 of their captions
  # (3.32M and 12.4M, Table 9), so the miniature's pre-trainings make passes
  # over them as the paper's do: at 4,800 steps of 64, 11.8 over CC12M-style
  # and 44 over CC3M-style data (the paper: about 660 and 2,470). With a
  # pass or two, a miniature measures what one sighting teaches, not what
  # distinct images of a concept add, which is the paper's point
  # (docs/synthetic_world.md, "Sizes and passes"). COCO-style data keeps the
  # size it needs to fine-tune on (10,000 captions), 8x more than the real
  # COCO's share relative to the web sources.
  c.num_cc3m = 7_000
  c.num_cc3m_dev = 250       # CC3M-style dev split (Table 7)
  c.num_cc12m = 26_125
  c.num_coco_train = 2_000
  c.num_coco_val = 250
  c.num_nocaps_val = 300
  # flickr_train is num_flickr - 2 * (num_flickr // 6): 500 images (2,500
  # captions), Flickr30K's 29K training images at the scale COCO-style data
  # has here (real COCO's 118K images at 1/59; docs/synthetic_world.md,
  # "Sizes and passes"): the two fine-tuning sets keep the paper's ratio of
  # images (29K / 118K).
  c.num_flickr = 750
  # Flickr30K's val and test galleries are 1,000 images each (paper Sec. 4.2,
  # the Karpathy split): R@K depends on the gallery's size, and a gallery of a
  # few dozen puts every pre-trained model at R@1 ~ 95, where neither the
  # reported figures nor the fine-tuning step chosen on val can separate
  # conditions. Images come in the order train, val, test (a split's bytes do
  # not depend on the sizes of the splits after it).
  c.num_flickr_val = 1_000
  c.num_flickr_test = 1_000
  c.vocab_size = 4000        # WordPiece vocabulary (upper bound)
  c.records_per_shard = 1000
  c.region_noise = 0.5       # std of region-feature noise around prototypes
  c.cc12m_duplicate_fraction = 0.05   # CC12M records re-using CC3M images
  c.cc12m_misaligned_fraction = 0.25  # loosely / not aligned alt-texts
  # CC3M captions that name something the image does not show: the paper's
  # raters found 90.3% of CC3M pairs a good fit (docs/synthetic_world.md).
  c.cc3m_misaligned_fraction = 0.1
  # Calibration against the paper's caption statistics (Sec. 2.3): CC12M
  # alt-texts are twice as long as CC3M captions (20.2 against 10.3 words)
  # and richer in types (token/type 370.0 against 804.8). The extra words are
  # what else an alt-text says (tags, titles, handles, dates), drawn from a
  # web vocabulary of web_vocab_size words; they name no concept. 0 = none.
  c.cc12m_context_words = 5.5
  # "alt_text", or "cc3m": an ablation that writes the cc12m source's pairs
  # (the same scenes) as CC3M's transformations would, without the web
  # context, misaligned at cc12m_misaligned_fraction: the caption's style
  # apart from the coverage (docs/synthetic_world.md, "Sources").
  c.cc12m_caption_style = "alt_text"
  # Both CC pipelines keep CC3M's image-text filter (paper Sec. 2.2, step 3):
  # a kept pair's raw alt-text holds a confident tag of its image. True: the
  # web sources (cc3m, cc3m_dev, cc12m) hold only such pairs, each record
  # redrawn until the curation's own filter passes it, its poor-fit decision
  # kept, so the misaligned shares stay the raters' shares of kept pairs.
  # False: pairs as drawn, about a fifth of cc12m's failing that filter
  # (docs/synthetic_world.md, "Misaligned pairs and the image-text filter").
  c.web_image_text_filter = False
  c.web_vocab_size = 2_000
  # Calibration against the paper's Table 9 (docs/synthetic_world.md):
  # Zipf exponent of the concepts' web frequencies; the probability that a
  # CC3M candidate showing a novel concept survives CC3M's filters; the
  # probability that a COCO image also shows a novel concept.
  c.zipf_exponent = 0.7
  # 0.3 puts CC3M-style data at 1.74x below CC12M-style per 1M captions for
  # a median out-of-domain class (Table 9: 1.8x); the CC12M-style density
  # is fixed by num_concepts first, so this knob moves CC3M's alone.
  c.cc3m_novel_keep = 0.3
  c.coco_novel_fraction = 0.17
  # Appearance modes (data/synthetic/world.py): how many appearances each
  # concept has, the share of a mode's prototype variance they all have in
  # common, and the Zipf exponent of their frequencies. A real class varies
  # within, which is what more distinct images of it cover; the paper gives
  # no statistic of that variety, so these are a pilot's values, not a
  # calibration (docs/synthetic_world.md, "Appearance modes"). 1 = one
  # appearance per concept (the world before modes, byte for byte).
  c.appearance_modes = 16
  c.mode_shared = 0.5
  c.mode_zipf_exponent = 1.0
  return c


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.mode = "pretrain"  # pretrain | finetune | evaluate | predict
  config.data = data_config()
  config.model = model_config()
  config.optim = optim_config()
  config.train = train_config()
  config.objectives = objectives_config()
  config.mesh = mesh_config()
  config.decode = decode_config()
  config.eval = eval_config()
  config.synthetic = synthetic_config()
  config.lock()
  return config
