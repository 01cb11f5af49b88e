"""Batch composition: a fixed number of labelled samples per batch, the rest unlabelled (with replacement)."""
from __future__ import annotations

import math

import torch


def iterations_per_epoch(n_train: int, batch_size: int) -> int:
    """An epoch is ceil(N_train / batch) iterations (the notes); N_train is the whole training pool
    less validation, the same for every method and every share of the unlabelled pool
    (training_data._pool_size)."""
    return max(1, math.ceil(n_train / batch_size))


def labelled_per_batch(n_labelled: int, n_unlabelled: int, batch_size: int,
                       fixed: int | None) -> int:
    """The paper keeps the labelled share of each batch equal to the share in the whole set."""
    if n_unlabelled == 0:
        return batch_size
    if fixed is not None:
        if fixed > batch_size:
            raise ValueError(f"labelled_per_batch = {fixed} exceeds batch_size = {batch_size}")
        return fixed
    return max(1, round(batch_size * n_labelled / (n_labelled + n_unlabelled)))


def sample_batch_indices(n_labelled: int, n_unlabelled: int, *, iterations: int, batch_size: int,
                         n_labelled_per_batch: int, generator: torch.Generator
                         ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of (labelled positions, unlabelled positions) per iteration.

    Labelled positions walk through fresh permutations; unlabelled ones are drawn with replacement.
    """
    n_l = n_labelled_per_batch if n_unlabelled else batch_size
    need = iterations * n_l
    perms = [torch.randperm(n_labelled, generator=generator) for _ in range(math.ceil(need / n_labelled))]
    labelled = torch.cat(perms)[:need].view(iterations, n_l)
    n_u = batch_size - n_l if n_unlabelled else 0
    unlabelled = torch.randint(n_unlabelled or 1, (iterations, n_u), generator=generator)
    return [(labelled[i], unlabelled[i]) for i in range(iterations)]
