"""Project Atlas: the numbers of the legal files (the material contracts register).

The files themselves are data (``worlds/atlas_legal.yaml``); :func:`compute` draws each
contract's revenue share, expiry and governing law and adds the tables the files show.
"""

from __future__ import annotations

from atoll_sample._world import WorldDraft


def compute(draft: WorldDraft) -> None:
    """Sets fact register and the files' computed rows (needs the data's facts and revenue)."""
    facts, rng = draft.facts, draft.rng
    counterparties = facts["counterparties"]
    shares = [rng.uniform(0.03, 0.12) for _ in counterparties]
    register, rows = [], []
    for (name, kind, coc), share in zip(counterparties, shares, strict=True):
        amount = round(facts["revenue"][2] * share)
        register.append((name, kind, amount, coc))
        expiry = f"202{rng.randrange(4, 9)}-12-31"
        rows.append([name, kind, amount, expiry, coc, rng.choice(facts["governing_laws"])])
    facts["register"] = register
    facts["register_rows"] = rows
    clauses = facts["change_of_control_clauses"]
    facts["change_of_control_contracts"] = [
        {"name": name, "contract_type": kind, "title": kind.title(), "clause": clauses[coc]}
        for name, kind, coc in counterparties
        if coc in clauses
    ]
    facts["top_customer_rows"] = [
        [rank, name, "see register"] for rank, (name, _k, _c) in enumerate(counterparties[:5], 1)
    ]
