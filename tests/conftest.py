"""Test-wide set-up.

Eight simulated CPU devices, so sharding tests run anywhere (set before JAX is
imported by any test module). Tests that want one device build a mesh over
`jax.devices()[:1]`.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow must never claim an accelerator that JAX will use.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
