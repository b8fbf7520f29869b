#!/usr/bin/env python3
"""Fit the polynomial of the f64 exp in src/cpu/simd/exp_f64-inl.h.

    fit_exp_f64.py [degree ...]      (default: 9; needs mpmath)

exp(r) is approximated on [-a, a], a = ln(2)/2 with a margin for the rounding of
n = round(z / ln 2), as 1 + r + r^2 p(r): the first two terms are exact, so the
rounding of small r costs nothing. The coefficients of p minimise the maximum
relative error |exp(r) - (1 + r + r^2 p(r))| / exp(r): weighted least squares on
Chebyshev nodes whose weights are multiplied by each node's error after every
solve (Lawson's iteration, which converges to the minimax solution), in 60-digit
arithmetic. Prints each degree's error before and after rounding the coefficients
to double (in units of 2^-53), then the coefficients, constant term first.
"""
import sys

import mpmath as mp

mp.mp.dps = 60
NODES = 400
ITERATIONS = 60


def relative_error(coefficients, r):
    p = sum(c * r**j for j, c in enumerate(coefficients))
    return abs((mp.exp(r) - 1 - r - r**2 * p) / mp.exp(r))


def fit(degree, a):
    nodes = [a * mp.cos(mp.pi * (k + mp.mpf(0.5)) / NODES) for k in range(NODES)]
    weights = [mp.mpf(1)] * NODES
    coefficients = None
    for _ in range(ITERATIONS):
        rows = mp.matrix(NODES, degree + 1)
        rhs = mp.matrix(NODES, 1)
        for k, r in enumerate(nodes):
            s = mp.sqrt(weights[k]) / mp.exp(r)
            for j in range(degree + 1):
                rows[k, j] = s * r ** (j + 2)
            rhs[k] = s * (mp.exp(r) - 1 - r)
        solution = mp.lu_solve(rows.T * rows, rows.T * rhs)
        coefficients = [solution[j] for j in range(degree + 1)]
        errors = [relative_error(coefficients, r) for r in nodes]
        total = sum(w * e for w, e in zip(weights, errors))
        weights = [w * e / total for w, e in zip(weights, errors)]
    return coefficients


def max_error(coefficients, a, samples=4000):
    return max(relative_error(coefficients, -a + 2 * a * k / samples) for k in range(samples + 1))


def main():
    degrees = [int(arg) for arg in sys.argv[1:]] or [9]
    a = mp.log(2) / 2 * mp.mpf("1.0001")
    ulp = mp.mpf(2) ** -53
    for degree in degrees:
        exact = fit(degree, a)
        rounded = [mp.mpf(float(c)) for c in exact]
        print(f"degree {degree}: max relative error {mp.nstr(max_error(exact, a) / ulp, 4)} x 2^-53, "
              f"{mp.nstr(max_error(rounded, a) / ulp, 4)} x 2^-53 with double coefficients")
        for c in exact:
            print("  ", float(c).hex())


if __name__ == "__main__":
    main()
