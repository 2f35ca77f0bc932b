#!/usr/bin/env python3
"""PyTorch's side of the BiLSTM step benchmark: one process, one measurement, one JSON line.

The same step as reel_bilstm_step: a bidirectional LSTM (one layer, hidden H per direction), the
final states of both directions into a 3862-class mixture-of-experts head (2 experts + dummy; the
same log-odds form as reel's), per-class sigmoid cross-entropy summed over classes and averaged
over the batch, backward, Adam (lr 1e-3).

  torch_step.py --shape video|audio --lengths 300,300,... --mode padded|packed [--steps 2]
                [--warmup 1] [--threads 2] [--flush-denormal] [--min-seconds 0]

Timed steps: at least --steps, and more until they add up to --min-seconds (the rule
reel_bilstm_step follows, so both programs' figures cover the same span of the machine's time);
"mean_s" is the window's time over its steps, "median_s" the median step, "steps_s" every step.

padded: the LSTM runs on the [B, T, D] tensor (its fastest path; exact only when every video has
T frames). packed: pack_padded_sequence (the exact path for different lengths).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

CLASSES = 3862
EXPERTS = 2
STEPS_T = 300


class MoeHead(torch.nn.Module):
    def __init__(self, inp, classes, experts):
        super().__init__()
        self.c, self.e = classes, experts
        self.gates = torch.nn.Linear(inp, classes * (experts + 1), bias=False)
        self.experts = torch.nn.Linear(inp, classes * experts)

    def forward(self, x):
        b = x.shape[0]
        log_g = F.log_softmax(self.gates(x).view(b, self.c, self.e + 1), dim=-1)
        a = self.experts(x).view(b, self.c, self.e)
        log_p = torch.logsumexp(log_g[..., 1:] + F.logsigmoid(a), dim=-1)
        log_q = torch.logsumexp(torch.cat([log_g[..., :1], log_g[..., 1:] + F.logsigmoid(-a)], -1), -1)
        return log_p - log_q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["video", "audio"], required=True)
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--mode", choices=["padded", "packed"], required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep timing steps until they add up to this many seconds")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True), as reel's LSTM flushes denormals")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: the step under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("torch.set_flush_denormal(True) is not supported on this CPU")
    torch.manual_seed(1)
    d, h = (1024, 256) if args.shape == "video" else (128, 128)
    lengths = [int(v) for v in args.lengths.split(",")]
    b = len(lengths)
    x = torch.zeros(b, STEPS_T, d)
    for i, n in enumerate(lengths):
        x[i, :n] = torch.rand(n, d) * 4 - 2
    y = torch.zeros(b, CLASSES)
    for i in range(b):
        y[i, torch.randint(0, CLASSES, (3,))] = 1
    lstm = torch.nn.LSTM(d, h, batch_first=True, bidirectional=True)
    head = MoeHead(2 * h, CLASSES, EXPERTS)
    opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)
    lens = torch.tensor(lengths)
    times, fwd_times, losses = [], [], []
    step = 0
    while step < args.warmup or len(times) < args.steps or sum(times) < args.min_seconds:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            if args.mode == "packed":
                _, (h_n, _) = lstm(pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False))
            else:
                _, (h_n, _) = lstm(x)
            logits = head(torch.cat([h_n[-2], h_n[-1]], dim=1))
        loss = F.binary_cross_entropy_with_logits(logits.float(), y, reduction="sum") / b
        t1 = time.perf_counter()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        losses.append(float(loss))
        if step >= args.warmup:
            times.append(t2 - t0)
            fwd_times.append(t1 - t0)
        step += 1
    print(json.dumps({"shape": args.shape, "mode": args.mode, "batch": b, "frames": sum(lengths),
                      "median_s": statistics.median(times), "mean_s": sum(times) / len(times),
                      "steps_s": times,
                      "forward_loss_s": statistics.median(fwd_times),
                      "first_loss": losses[0], "last_loss": losses[-1],
                      "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "flush_denormal": args.flush_denormal, "autocast": args.autocast}))


if __name__ == "__main__":
    main()
