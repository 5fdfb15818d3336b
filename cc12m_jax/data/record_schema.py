"""The feature record's fixed sizes and storage dtypes, without TensorFlow.

records.py (the tf.train.Example writer and parser) and the batch contract
(batch_spec.py) both size themselves from here, so the models, objectives and
train step, which read only the batch contract, import no TensorFlow: an
accelerator image without it can build and time them (docs/architecture.md).
The format itself is documented in docs/record_format.md.
"""
import numpy as np

MAX_REGIONS = 16
MAX_TAGS = 16
FORMAT_VERSION = 1

# Storage dtypes of global / region features: numpy little-endian dtype.
# float16 halves the bytes every stage of the input pipeline reads, checks
# (TFRecord CRC), copies and parses (docs/record_format.md).
FEATURE_DTYPES = {"float32": np.dtype("<f4"), "float16": np.dtype("<f2")}


def check_feature_dtype(feature_dtype: str, where: str = "feature_dtype") -> np.dtype:
  """The numpy dtype of a storage dtype name; an error naming `where`."""
  if feature_dtype not in FEATURE_DTYPES:
    raise ValueError(f"{where}={feature_dtype!r}: choose one of "
                     f"{sorted(FEATURE_DTYPES)}")
  return FEATURE_DTYPES[feature_dtype]
