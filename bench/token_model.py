"""The BERT-like token model and its generated data, for time to accuracy
with compression (bench/run_compress.py --model bert exports it with
Debian's torch; bench/ddp_train.py --model bert trains it with PyPI torch).

The model is scripts/model_zoo.py's TinyEncoder scaled up: token and
position embeddings, nn.TransformerEncoder (post-norm, GELU, no dropout)
with a padding mask computed from the token ids (id 0: Equal -> Where in
the export), the mean over all positions, a linear classifier. Its
parameters are the ONNX initializers by name (the TorchScript exporter
keeps them), so ddp_train.py's --init-onnx copies them 1:1.

The data: sequence classification over generated token sequences (not a
real corpus). Each class has its own "topic": TOPIC token ids drawn
without replacement from the vocabulary, and every position of a sequence
of that class is a topic token with probability SIGNAL, else a background
token (Zipf-distributed over the whole vocabulary, the same for every
class); each sequence has a length uniform in [SEQ/2, SEQ], padded with id
0 after it. A label is wrong (uniform over the classes) with probability
LABEL_NOISE, which caps the reachable accuracy. The model has to learn which
of the vocabulary's many rare ids belong to which class, from a few
occurrences each, so accuracy rises over the whole run instead of in its
first steps.

Files, as oasr-run's --data=tokens:FILE reads them: FILE (u16 ids, SEQ per
sequence) and FILE.labels (little-endian int64, one per sequence).
"""
import numpy as np

# The models (bench/run_compress.py --model NAME): "bert", 1.85 M
# parameters (7.4 MB of f32 gradients, 4.2 MB of them the token
# embedding), and "bert-tiny" for quick checks.
MODELS = {
    "bert": dict(vocab=8192, seq=32, dim=128, heads=4, ff=512, layers=4, classes=16),
    "bert-tiny": dict(vocab=1024, seq=16, dim=32, heads=2, ff=64, layers=2, classes=16),
}
# Their data (generate()'s arguments; the number of sequences is the
# caller's).
DATA = {
    "bert": dict(topic=96, signal=0.25, label_noise=0.05, zipf=1.1, seed=7),
    "bert-tiny": dict(topic=32, signal=0.25, label_noise=0.05, zipf=1.1, seed=7),
}


def make_model(vocab, seq, dim, heads, ff, layers, classes, pad_id=0):
    import torch
    import torch.nn as nn

    class BertLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.pad_id = pad_id
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
            layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout=0.0,
                                               activation="gelu", batch_first=True)
            kwargs = {}
            if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames:
                kwargs["enable_nested_tensor"] = False
            self.encoder = nn.TransformerEncoder(layer, layers, **kwargs)
            self.head = nn.Linear(dim, classes)

        def forward(self, ids):
            pad = ids == self.pad_id
            x = self.encoder(self.tok(ids) + self.pos, src_key_padding_mask=pad)
            return self.head(x.mean(1))

    return BertLike()


def generate(path, vocab, seq, classes, sequences, topic, signal, label_noise, zipf,
             seed, **_):
    """Writes PATH and PATH.labels; returns the labels."""
    rng = np.random.RandomState(seed)
    ids = np.arange(1, vocab)  # 0 is padding
    topics = [rng.choice(ids, size=topic, replace=False) for _ in range(classes)]
    ranks = np.arange(1, vocab, dtype=np.float64)
    bg_p = ranks ** -zipf
    bg_p /= bg_p.sum()
    bg_ids = rng.permutation(ids)  # background frequency independent of id
    labels = rng.randint(0, classes, size=sequences)
    out = np.zeros((sequences, seq), dtype=np.uint16)
    lengths = rng.randint(seq // 2, seq + 1, size=sequences)
    for i in range(sequences):
        n = lengths[i]
        bg = bg_ids[rng.choice(len(bg_ids), size=n, p=bg_p)]
        tp = topics[labels[i]][rng.randint(0, topic, size=n)]
        out[i, :n] = np.where(rng.random_sample(n) < signal, tp, bg)
    noisy = rng.random_sample(sequences) < label_noise
    shown = np.where(noisy, rng.randint(0, classes, size=sequences), labels)
    out.astype("<u2").tofile(path)
    shown.astype("<i8").tofile(path + ".labels")
    return shown


def read(path, seq):
    """(ids [N, SEQ] int64, labels [N] int64) of a generated file."""
    ids = np.fromfile(path, dtype="<u2").astype(np.int64).reshape(-1, seq)
    labels = np.fromfile(path + ".labels", dtype="<i8")
    return ids, labels
