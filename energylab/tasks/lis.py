"""Longest increasing subsequence (LIS) in the chain-of-thought format of Feng et al. (2023), as used by paper 000.

Given s ∈ ℕ^L, the dynamic programme

    dp_l = 1 + max{ dp_i : i < l, s_i < s_l }      (max over the empty set = 0)

gives the length of the longest increasing subsequence ending at position l, and LIS(s) = max_l dp_l. A sample
writes the whole trace out, so that a decoder can learn one DP step per generated token:

    s_1 … s_L  <sep>  dp_1 … dp_L  <sep>  max_l dp_l  <eos>          (2L + 4 tokens)

Vocabulary: pad 0, sep 1, eos 2, the number n is token n + 3. Inputs are distinct numbers drawn from
[L + 1, high), so they never collide with the DP values 1 … L; a random-length increasing subsequence is planted so
that answers spread over 1 … L (a random permutation alone has LIS ≈ 2√L). The model reads ``tokens[:, :-1]`` and
predicts ``tokens[:, 1:]``; the loss covers only the *answer tokens*, those after the first separator (the DP
trace, the second separator, the answer and eos: L + 3 tokens).

Exact match: a sample is correct only if every answer token is. Under greedy decoding with a causal model this
equals "every teacher-forced argmax is right" (by induction the greedy prefix then equals the target prefix), so
:func:`exact_match` needs one forward pass; :func:`greedy_decode` does the real autoregressive generation and the
tests check that both agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

PAD, SEP, EOS = 0, 1, 2  # special tokens
OFFSET = 3  # the number n is token n + OFFSET
IGNORE = -100  # target value that cross-entropy skips (F.cross_entropy's default ignore_index)


def check_lis(length: int, high: int) -> None:
    """ValueError naming the argument for L < 1 or a range [L+1, high) too small for L distinct numbers."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length (L) must be an int >= 1, got {length!r}")
    if not isinstance(high, int) or isinstance(high, bool) or high - (length + 1) < length:
        raise ValueError(f"high must be an int >= 2L + 1 = {2 * length + 1} so that [L+1, high) holds L distinct "
                         f"numbers, got {high!r}")


def vocab_size(high: int) -> int:
    """Number of token ids for numbers below ``high`` (specials included)."""
    return high + OFFSET


def seq_len(length: int) -> int:
    """Tokens in one sample: 2L + 4."""
    return 2 * length + 4


def lis_dp(s: torch.Tensor) -> torch.Tensor:
    """dp_l = 1 + max_{i<l, s_i<s_l} dp_i for every row. s: (B, L) integers  ->  (B, L) int64."""
    if not isinstance(s, torch.Tensor) or s.dim() != 2 or s.is_floating_point():
        raise ValueError(f"s must be an integer tensor of shape (B, L), got {getattr(s, 'shape', type(s))}")
    dp = torch.ones_like(s, dtype=torch.long)
    for l in range(1, s.shape[1]):
        smaller = s[:, :l] < s[:, l:l + 1]  # (B, l): s_i < s_l
        dp[:, l] = 1 + torch.where(smaller, dp[:, :l], 0).max(dim=1).values
    return dp


def sample_sequences(n: int, length: int, high: int, generator: torch.Generator | None = None,
                     answers: tuple[int, int] | None = None) -> torch.Tensor:
    """n sequences of L distinct numbers from [L+1, high) with a planted increasing subsequence. -> (n, L) int64.

    ``answers=None``: the planted part is k ~ U{1..L} random positions whose values are put in increasing order,
    so LIS ≥ k (Feng et al.'s recipe; about 1/L of the rows come out fully sorted).
    ``answers=(lo, hi)``: every row's LIS is exactly a ~ U{lo..hi}, drawn first; the row is planted with k = a and
    redrawn until its LIS is not longer (rejection), so no answer and no trace is more frequent than the design
    says. See :func:`check_answers` for the valid range.
    """
    check_lis(length, high)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if answers is None:
        return _planted(n, length, high, generator)
    lo, hi = check_answers(answers, length)
    target = torch.randint(lo, hi + 1, (n, 1), generator=generator)  # the LIS every row must have
    out = torch.empty(n, length, dtype=torch.long)
    todo = torch.arange(n)
    for _ in range(_MAX_ROUNDS):
        draw = _planted(len(todo), length, high, generator, target[todo])  # LIS ≥ target by construction
        ok = lis_dp(draw).max(dim=1).values == target[todo, 0]
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
        if len(todo) == 0:
            return out
    raise ValueError(f"answers={answers} at L={length}: rows with LIS = {lo} are too rare to draw by rejection; "
                     f"raise lo")


_MAX_ROUNDS = 2000  # rejection rounds; LIS = 3 at L = 10 is accepted ~5% of the time, so ~300 rounds suffice


def check_answers(answers, length: int) -> tuple[int, int]:
    """(lo, hi) with 2 <= lo <= hi <= L, else ValueError naming ``answers`` (LIS = 1 needs a decreasing input,
    which planting never gives)."""
    ok = (isinstance(answers, (tuple, list)) and len(answers) == 2
          and all(isinstance(a, int) and not isinstance(a, bool) for a in answers))
    if not ok or not 2 <= answers[0] <= answers[1] <= length:
        raise ValueError(f"answers must be (lo, hi) ints with 2 <= lo <= hi <= L = {length}, got {answers!r}")
    return int(answers[0]), int(answers[1])


def _planted(n: int, length: int, high: int, generator: torch.Generator | None,
             k: torch.Tensor | None = None) -> torch.Tensor:
    """n rows of L distinct numbers with k[i] random positions sorted increasingly (k: (n, 1); None: k ~ U{1..L},
    drawn after the values, the order of the original recipe). -> (n, L)."""
    L, span = length, high - length - 1
    values = torch.rand(n, span, generator=generator).argsort(dim=1)[:, :L] + L + 1  # (n, L) distinct
    if k is None:
        k = torch.randint(1, L + 1, (n, 1), generator=generator)  # planted length per row
    rank = torch.rand(n, L, generator=generator).argsort(dim=1).argsort(dim=1)  # a random permutation per row
    planted = rank < k  # (n, L): k positions per row
    pos = torch.arange(L).expand(n, L)
    pos_order = torch.where(planted, pos, pos + L).argsort(dim=1)  # planted positions first, in order
    sorted_vals = torch.where(planted, values, high).sort(dim=1).values  # planted values first, increasing
    j = torch.arange(L).expand(n, L)
    new = torch.where(j < k, sorted_vals, values.gather(1, pos_order))  # unplanted slots keep their value
    return values.scatter(1, pos_order, new)


def encode(s: torch.Tensor) -> torch.Tensor:
    """Chain-of-thought samples ``s <sep> dp <sep> max(dp) <eos>`` as tokens. s: (B, L) -> (B, 2L+4) int64."""
    dp = lis_dp(s)
    B = s.shape[0]
    sep = torch.full((B, 1), SEP, dtype=torch.long)
    eos = torch.full((B, 1), EOS, dtype=torch.long)
    answer = dp.max(dim=1, keepdim=True).values
    return torch.cat([s.long() + OFFSET, sep, dp + OFFSET, sep, answer + OFFSET, eos], dim=1)


def decode_numbers(tokens: torch.Tensor) -> torch.Tensor:
    """Inverse of the number encoding (specials become negative). tokens (...) -> (...)."""
    return tokens - OFFSET


@dataclass
class LISData:
    """Train and test token tensors of one task size, (n, 2L+4) each."""

    length: int  # L
    high: int  # numbers are drawn from [L+1, high)
    train: torch.Tensor
    test: torch.Tensor


def make_data(length: int, n_train: int, n_test: int, high: int = 250, seed: int = 0,
              answers: tuple[int, int] | None = None) -> LISData:
    """Train and test sets drawn independently (seeds ``seed`` and ``seed + 10**6``); test rows that also occur in
    the train set are dropped and replaced by fresh draws, so the two sets share no sample. ``answers``: see
    :func:`sample_sequences`."""
    check_lis(length, high)
    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    train_s = sample_sequences(n_train, length, high, torch.Generator().manual_seed(seed), answers)
    seen = {tuple(row) for row in train_s.tolist()}
    gen_test = torch.Generator().manual_seed(seed + 10 ** 6)
    kept: list[torch.Tensor] = []
    have = 0
    for _ in range(20):
        draw = sample_sequences(n_test, length, high, gen_test, answers)
        fresh = torch.tensor([tuple(row) not in seen for row in draw.tolist()], dtype=torch.bool)
        kept.append(draw[fresh])
        have += int(fresh.sum())
        if have >= n_test:
            return LISData(length, high, encode(train_s), encode(torch.cat(kept)[:n_test]))
    raise ValueError(f"could not draw {n_test} test samples unseen in training: increase high or reduce n_train")


def inputs_targets(tokens: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Model input ``tokens[:, :-1]`` and targets ``tokens[:, 1:]`` with everything up to the first separator set
    to IGNORE. tokens (B, 2L+4) -> x (B, 2L+3), y (B, 2L+3)."""
    x, y = tokens[:, :-1], tokens[:, 1:].clone()
    y[:, :length] = IGNORE  # targets s_2 … s_L and <sep> are not answer tokens
    return x, y


def exact_match(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Metrics from teacher-forced logits (B, N, V) and targets (B, N) with IGNORE outside the answer.

    Returns 0-d tensors: ``exact`` (all answer tokens right; equals greedy-decoding exact match), ``answer`` (the
    final LIS length right, under teacher forcing), ``trace`` (all of dp_1 … dp_L right; by the same induction
    this equals the greedy trace being right) and ``token`` (fraction of answer tokens right).
    """
    mask = targets != IGNORE
    right = (logits.argmax(-1) == targets) | ~mask  # (B, N)
    exact = right.all(dim=1).float().mean()
    token = ((logits.argmax(-1) == targets) & mask).sum() / mask.sum()
    answer = right[:, -2].float().mean()  # the last target is eos; the one before it is max(dp)
    L = (targets.shape[1] - 3) // 2  # N = 2L + 3 targets; dp_1 … dp_L are targets L … 2L-1
    trace = right[:, L:2 * L].all(dim=1).float().mean()
    return {"exact": exact, "answer": answer, "trace": trace, "token": token}


def greedy_answer_right(model: Callable[[torch.Tensor], torch.Tensor], tokens: torch.Tensor,
                        length: int) -> torch.Tensor:
    """Per sample (B,) bool: is the LIS that the model writes after its *own* greedy trace the right one?

    This is the honest answer accuracy: under teacher forcing the answer is max(dp) of the given trace, which a model
    can copy without solving anything. Rows whose teacher-forced trace is right decode exactly that trace, so only
    the others are decoded (L + 2 passes). tokens (B, 2L+4).
    """
    x, y = inputs_targets(tokens, length)
    pred = model(x).argmax(-1)  # (B, 2L+3)
    right = pred[:, length:2 * length + 2] == y[:, length:2 * length + 2]  # dp_1 … dp_L, <sep>, answer
    out = right.all(dim=1)
    wrong_trace = ~right[:, :length + 1].all(dim=1)
    if wrong_trace.any():
        rows = tokens[wrong_trace]
        generated = greedy_decode(model, rows[:, :length + 1], length + 2)  # up to and including the answer
        out[wrong_trace] = generated[:, 2 * length + 2] == rows[:, 2 * length + 2]
    return out


@torch.no_grad()
def greedy_decode(model: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor, steps: int) -> torch.Tensor:
    """Append ``steps`` argmax tokens to ``prompt`` (B, P) one at a time. model: (B, N) -> (B, N, V) logits.

    Returns (B, P + steps). No KV cache: each step reruns the prefix (this is a reference, not a fast path).
    """
    out = prompt
    for _ in range(steps):
        nxt = model(out)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out = torch.cat([out, nxt], dim=1)
    return out


def greedy_exact_match(model, tokens: torch.Tensor, length: int) -> torch.Tensor:
    """Fraction of samples whose greedily generated answer (L + 3 tokens after the prompt) equals the target."""
    prompt = tokens[:, :length + 1]  # s_1 … s_L <sep>
    generated = greedy_decode(model, prompt, tokens.shape[1] - prompt.shape[1])
    return (generated == tokens).all(dim=1).float().mean()
