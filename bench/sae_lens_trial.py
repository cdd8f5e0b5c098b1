"""SAELens 6 (TopK) trained on the very vectors bench/sae.py trained BERT Lens's loop on, for the issue's "use SAELens
if it trains as well" question. Runs in a throwaway venv (SAELens pulls transformer-lens, wandb, plotly, nltk,
statsmodels ... that BERT Lens does not need):

    python -m venv /tmp/saelens-venv
    echo /work/main/.venv/lib/python3.11/site-packages > /tmp/saelens-venv/lib/python3.11/site-packages/main.pth
    /tmp/saelens-venv/bin/pip install sae-lens==6.54.12
    python bench/sae.py --corpus snli:train:2000 --steps 200 --dump /tmp/sae-vectors.npz      # BERT Lens's figures
    /tmp/saelens-venv/bin/python bench/sae_lens_trial.py /tmp/sae-vectors.npz --steps 200    # SAELens's

Same F, k, batch (1,024 tokens), steps, learning rate and normalisation (SAELens's "expected_average_only_in":
E‖x‖² = d, as ours); its AuxK coefficient and dead-feature window are its defaults. Quality is measured here with
the same formula as core.analyses.sparse_features.measure: held-out FVE and features that never fire there.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vectors", help="the .npz bench/sae.py --dump wrote (train, held)")
    parser.add_argument("--features", type=int, default=3072)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    started = time.monotonic()
    from sae_lens import TopKTrainingSAE, TopKTrainingSAEConfig
    from sae_lens.config import SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    import_seconds = time.monotonic() - started
    data = np.load(args.vectors)
    train, held = torch.from_numpy(data["train"]), torch.from_numpy(data["held"])
    d = train.shape[1]
    sae = TopKTrainingSAE(TopKTrainingSAEConfig(d_in=d, d_sae=args.features, k=args.k, dtype="float32", device="cpu",
                                                normalize_activations="expected_average_only_in"))

    def batches():
        step = 0
        while True:
            generator = torch.Generator().manual_seed(step)
            yield train[torch.randint(0, len(train), (args.batch,), generator=generator)]
            step += 1

    trainer = SAETrainer(SAETrainerConfig(total_training_samples=args.steps * args.batch,
                                          train_batch_size_samples=args.batch, lr=args.lr, lr_end=args.lr, device="cpu",
                                          n_batches_for_norm_estimate=20), sae, batches())
    started = time.monotonic()
    trained = trainer.fit()
    train_seconds = time.monotonic() - started
    with torch.no_grad():
        recon = trained(held)
        codes = trained.encode(held)
    fve = 1 - float(((held - recon) ** 2).sum() / ((held - held.mean(dim=0)) ** 2).sum())
    print(json.dumps({"library": "sae-lens", "steps": args.steps, "train_tokens": len(train),
                      "held_tokens": len(held), "import_seconds": round(import_seconds, 1),
                      "train_seconds": round(train_seconds, 1), "fve": fve,
                      "dead_fraction": float(((codes > 0).sum(dim=0) == 0).float().mean()),
                      "mean_active": float((codes > 0).sum(dim=1).float().mean())}, indent=1))


if __name__ == "__main__":
    main()
