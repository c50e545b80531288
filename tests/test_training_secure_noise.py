"""fedbound.training.secure_noise: N(0, 1) from the OS CSPRNG.

The draws are unseeded by design; the distribution tests replace ``os.urandom`` by a seeded byte source, so
they check the transform (bits -> Gaussian) deterministically; the transform's test vectors are computed
here with mpmath at 50 digits."""

from __future__ import annotations

import math
import os

import mpmath
import numpy as np
import pytest
import torch
from scipy import stats

from fedbound.training import secure_noise as sn
from fedbound.training.noise import Streams


@pytest.fixture
def seeded_bytes(monkeypatch):
    """``os.urandom`` replaced by a seeded byte stream (the transform under test, reproducibly)."""
    rng = np.random.default_rng(20240607)
    monkeypatch.setattr(os, "urandom", lambda n: rng.bytes(n))


def _gaussians(m: int, j: int, k: int) -> tuple[float, float]:
    """The Box-Muller pair of mantissa ``m``, geometric count ``j`` and angle word ``k``, at 50 digits."""
    mpmath.mp.dps = 50
    v = (mpmath.mpf(2) ** 52 + 2 * m + 1) / mpmath.mpf(2) ** 53
    u = v / mpmath.mpf(2) ** j
    r = mpmath.sqrt(-2 * mpmath.log(u))
    theta = (2 * mpmath.mpf(k) + 1) / mpmath.mpf(2) ** 53
    return float(r * mpmath.cos(2 * mpmath.pi * theta)), float(r * mpmath.sin(2 * mpmath.pi * theta))


def test_box_muller_test_vectors(monkeypatch):
    """Words -> (U, Theta) -> (R cos, R sin): Downey's uniform (J trailing zeros of the low 13 bits, V from
    the other 51) and Box & Muller's transform, against mpmath; an all-zero field continues into fresh
    words (here: one zero word, then one with 5 trailing zeros: J = 13 + 64 + 5 = 82, a draw near 11 sigma,
    beyond the 8.57 sigma a 53-bit uniform can reach)."""
    fresh = iter([np.zeros(1, np.uint64).tobytes(), np.array([1 << 5], np.uint64).tobytes()])
    monkeypatch.setattr(os, "urandom", lambda n: next(fresh))
    cases = [(0, 0b1, 0), ((1 << 51) - 1, 0b100, (1 << 52) - 1), (123456789, 0b1000, 987654321),
             (2**50, 0, 2**51)]
    first = np.array([(m << 13) | field for m, field, _ in cases], dtype=np.uint64)
    second = np.array([k << 12 for *_, k in cases], dtype=np.uint64)
    cos, sin = sn._box_muller(first, second)
    for i, ((m, _, k), j) in enumerate(zip(cases, (0, 2, 3, 82), strict=True)):
        want = _gaussians(m, j, k)
        assert cos[i] == pytest.approx(want[0], rel=1e-13, abs=1e-13)
        assert sin[i] == pytest.approx(want[1], rel=1e-13, abs=1e-13)
    assert math.hypot(cos[3], sin[3]) > 10.0 > math.sqrt(2 * 53 * math.log(2))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_draws_are_standard_normal(seeded_bytes, dtype):
    """10^6 draws: Kolmogorov-Smirnov against N(0, 1) (scipy), mean and variance within 5 standard errors,
    and the tail mass beyond 4 sigma within 5 standard errors of 2 Phi(-4)."""
    n = 1_000_000
    z = sn.secure_standard_normal((n,), dtype).double().numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / n)
    tail, p = np.mean(np.abs(z) > 4.0), 2 * stats.norm.sf(4.0)
    assert abs(tail - p) < 5 * math.sqrt(p / n)


def test_the_radius_is_exactly_exponential(seeded_bytes):
    """R^2 / 2 = J ln 2 - ln V = -ln U must be Exp(1) (Box-Muller's premise), in the far tail too: KS against
    scipy's exponential, and P(-ln U > 20) (where a 24-bit float32 uniform stops at 16.6) within 5 s.e."""
    n = 1_000_000
    words = sn._words(n)
    v = (2.0 * (words >> np.uint64(13)).astype(np.float64) + 1.0 + 2.0 ** 52) * 2.0 ** -53
    e = sn._geometric(words & np.uint64((1 << 13) - 1)) * math.log(2) - np.log(v)
    assert stats.kstest(e, "expon").pvalue > 1e-3
    j = sn._geometric(sn._words(n) & np.uint64((1 << 13) - 1))
    for k in (1, 5, 13, 16):  # P(J >= k) = 2^-k, across the continuation into fresh words at 13
        p = 2.0 ** -k
        assert abs(np.mean(j >= k) - p) < 5 * math.sqrt(p / n) + 1e-12


def test_each_draw_is_half_the_sum_of_four(monkeypatch):
    """Holohan & Braghin 2021, Sec. 5.1 (n = 2): a draw is (Z1 + Z2 + Z3 + Z4) / 2 of four Box-Muller
    draws of its own words."""
    rng = np.random.default_rng(7)
    blob = rng.bytes(8 * 4 * 3)
    monkeypatch.setattr(os, "urandom", lambda n: blob[:n])
    out = sn.secure_normal_numpy(3)
    words = np.frombuffer(blob, np.uint64).reshape(2, 6)
    cos, sin = sn._box_muller(words[0], words[1])
    np.testing.assert_allclose(out, 0.5 * (cos[:3] + cos[3:] + sin[:3] + sin[3:]), rtol=1e-15)


def test_draws_come_from_os_urandom_and_touch_no_global_rng(monkeypatch):
    calls = []
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: calls.append(n) or real(n))
    np.random.seed(3)
    torch.manual_seed(3)
    np_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    a = sn.secure_standard_normal((1000,))
    b = sn.secure_standard_normal((1000,))
    assert sum(calls) >= 2 * 1000 * 32  # 32 bytes a draw (four Box-Muller draws)
    np.testing.assert_array_equal(np.random.get_state()[1], np_state)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert not torch.equal(a, b)
    assert a.dtype == torch.float32 and a.shape == (1000,)


def test_uniforms(seeded_bytes):
    u = sn.secure_uniform((200_000,), torch.float32).double().numpy()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert u.max() < 1.0 and u.min() >= 0.0
    assert sn.secure_uniform((3, 4), torch.float64).shape == (3, 4)


def test_secure_streams():
    """normal and uniform_population: fresh at every call whatever the key; numpy: the seed's, or with a
    secret a stream fixed by (secret, key) and unlike the seed's."""
    streams = sn.SecureStreams(5)
    a = streams.normal(("uplink", 0), [1, 2], (50,))
    b = streams.normal(("uplink", 0), [1, 2], (50,))
    assert a.shape == (2, 50) and not torch.equal(a, b)
    assert streams.uniform_population(("batch", 0, 0), 10, 7, [3], torch.float64).shape == (1, 7)
    seeded = Streams(5).numpy("participation", 0).random(8)
    np.testing.assert_array_equal(streams.numpy("participation", 0).random(8), seeded)
    keyed = sn.SecureStreams(5, secret=b"k" * 32)
    first = keyed.numpy("participation", 0).random(8)
    np.testing.assert_array_equal(sn.SecureStreams(9, secret=b"k" * 32).numpy("participation", 0).random(8),
                                  first)  # the secret, not the seed
    assert not np.array_equal(first, seeded)
    assert not np.array_equal(first, keyed.numpy("participation", 1).random(8))
    other = sn.SecureStreams(5, secret=b"j" * 32)
    assert not np.array_equal(first, other.numpy("participation", 0).random(8))
    assert len(sn.new_secret()) == 32 and sn.new_secret() != sn.new_secret()
