"""Noisy gradient descent for the linear models: full-batch ``gd`` (Bassily-Smith-Thakurta 2014).

The optimisers release a (clipped) loss gradient at every step with dpcore's exact discrete
Gaussian; everything else they do is post-processing of those releases.

Privacy
-------
Each function states the sensitivity of the gradient it releases and the zCDP of one step; the
estimator that calls it charges the whole fit once, before the first step.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcore._floats import round_down
from dpcore.learn._optimise import softmax_rows
from dpcore.mechanisms import gaussian

__all__ = ["noisy_gd", "noisy_gd_multinomial"]


def noisy_gd(loss_fn, Z, lam, rho, n_steps, step_size, rng):
    """Noisy projected gradient descent (Bassily-Smith-Thakurta 2014) for
    (1/n) sum loss(Z w) + (lam/2)||w||^2, returning the average iterate.

    Every row has ||z_i|| <= 1 and |loss'| <= 1, so the averaged loss gradient moves by at most
    2/n in L2 when one row is replaced: each step releases it with dpcore's exact discrete
    Gaussian at ``rho / n_steps`` (rounded down); the regulariser's gradient, the step, the
    projection on the ball of radius 1/lam (which holds the minimiser: lam ||w*|| =
    ||mean gradient|| <= 1) and the averaging are post-processing.
    """
    n, d = Z.shape
    rho_step = round_down(Fraction(rho) / n_steps)
    radius = 1.0 / lam
    w = np.zeros(d)
    total = np.zeros(d)
    for _ in range(n_steps):
        _, d1, _ = loss_fn(Z @ w)
        g = np.asarray(gaussian(Z.T @ d1 / n, sensitivity=2.0 / n, rho=rho_step, random_state=rng))
        w = w - step_size * (g + lam * w)
        norm = float(np.linalg.norm(w))
        if norm > radius:
            w *= radius / norm
        total += w
    return total / n_steps


def noisy_gd_multinomial(Xs, labels, k, lam, rho, n_steps, step_size, rng):
    """Noisy projected gradient descent for the k-class softmax objective
    (1/n) sum_i [logsumexp(W x_i) - (W x_i)_{y_i}] + (lam/2)||W||^2, average iterate.

    The averaged loss gradient (P - Y)^T X / n moves by at most 2 sqrt(2) / n in Frobenius
    norm when one record (and its label) is replaced (||p - e_y|| <= sqrt 2, ||x|| <= 1): each
    step releases it with the exact discrete Gaussian at ``rho / n_steps``; the rest is
    post-processing (the ball of radius sqrt(2)/lam holds the minimiser).
    """
    n, d = Xs.shape
    rho_step = round_down(Fraction(rho) / n_steps)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), labels] = 1.0
    radius = math.sqrt(2.0) / lam
    W = np.zeros((k, d))
    total = np.zeros((k, d))
    for _ in range(n_steps):
        G = (softmax_rows(Xs @ W.T) - onehot).T @ Xs / n
        G = np.asarray(gaussian(G, sensitivity=2.0 * math.sqrt(2.0) / n, rho=rho_step,
                                random_state=rng))
        W = W - step_size * (G + lam * W)
        norm = float(np.linalg.norm(W))
        if norm > radius:
            W *= radius / norm
        total += W
    return total / n_steps
