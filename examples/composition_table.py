"""Print the accounting comparison of docs/accounting.md (markdown tables).

    python3 examples/composition_table.py [--epsilon 1] [--delta 1e-6]

Table 1: the total ε at δ of k releases with σ = Δ = 1, by each accounting method.
Table 2: the σ per query that each method needs for k queries to be (ε, δ)-DP together.
"""

from __future__ import annotations

import argparse

from dpgauss.privacy.composition import METHODS, composed_epsilon, composed_sigma

NAMES = {
    "exact": "exact (μ-GDP)",
    "basic": "analytic + basic composition",
    "advanced": "analytic + optimal advanced (KOV)",
    "rdp": "Rényi DP (orders grid)",
    "zcdp": "zCDP (CKS conversion)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    ks = (1, 10, 100, 1000)
    header = "| method | " + " | ".join(f"k = {k}" for k in ks) + " |"
    rule = "| --- |" + " ---: |" * len(ks)

    print(f"Total ε at δ = {args.delta:g} of k releases with σ = Δ = 1:\n")
    print(header, rule, sep="\n")
    for m in METHODS:
        cells = " | ".join(f"{composed_epsilon(m, k, 1.0, args.delta):.2f}" for k in ks)
        print(f"| {NAMES[m]} | {cells} |")

    print(f"\nσ per query (Δ = 1) for k queries to be ({args.epsilon:g}, {args.delta:g})-DP:\n")
    print(header, rule, sep="\n")
    exact = {k: composed_sigma("exact", k, args.epsilon, args.delta) for k in ks}
    for m in METHODS:
        cells = []
        for k in ks:
            s = exact[k] if m == "exact" else composed_sigma(m, k, args.epsilon, args.delta)
            cells.append(f"{s:.3f}" + ("" if m == "exact" else f" ({(s / exact[k]) ** 2:.2f}×)"))
        print(f"| {NAMES[m]} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
