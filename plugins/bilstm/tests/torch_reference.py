#!/usr/bin/env python3
"""Reference for reel's BiLSTM encoder: torch.nn.LSTM(bidirectional=True) on packed sequences.

Usage: torch_reference.py INPUT OUTPUT. Both files hold one array per line, "name v1 v2 ...".
INPUT has the shape scalars (input, hidden, layers, steps), lengths, x ([B, T, I], batch-first,
zero-padded), r ([B, 2H], the loss weights) and reel's weights in reel's layout:
l<k>/<fwd|bwd>/wx [I, 4, H], .../wh [H, 4, H], .../b [4, H] (gate order i, f, g, o, as torch's).
For pooling in (last, mean) it computes in float64 the encoding (last: [h_n fwd, h_n bwd] of the
top layer; mean: the top outputs averaged over the valid frames), loss = sum(r * encoding) and its
gradients, and writes <pooling>/enc, <pooling>/outputs ([B, T, 2H], zero past each length) and
<pooling>/<block> gradients in reel's layout. torch's two biases get reel's bias and zero; their
gradients are equal, so reel's bias gradient is compared with bias_ih's.
Exits with 77 when torch cannot be imported.
"""
import sys

try:
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
except ImportError:
    sys.exit(77)  # tells the test to try another interpreter, or skip


def read(path):
    arrays = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                arrays[parts[0]] = [float(v) for v in parts[1:]]
    return arrays


def main():
    a = read(sys.argv[1])
    i_n, h, layers, steps = (int(a[k][0]) for k in ("input", "hidden", "layers", "steps"))
    lengths = [int(v) for v in a["lengths"]]
    b_n = len(lengths)
    dt = torch.float64
    torch.set_num_threads(1)
    x = torch.tensor(a["x"], dtype=dt).reshape(b_n, steps, i_n)
    r = torch.tensor(a["r"], dtype=dt).reshape(b_n, 2 * h)
    out_lines = []
    for pooling in ("last", "mean"):
        lstm = torch.nn.LSTM(i_n, h, num_layers=layers, bidirectional=True, batch_first=True).to(dt)
        with torch.no_grad():
            for k in range(layers):
                ins = i_n if k == 0 else 2 * h
                for d, sfx in (("fwd", ""), ("bwd", "_reverse")):
                    p = f"l{k}/{d}/"
                    getattr(lstm, f"weight_ih_l{k}{sfx}").copy_(
                        torch.tensor(a[p + "wx"], dtype=dt).reshape(ins, 4 * h).t())
                    getattr(lstm, f"weight_hh_l{k}{sfx}").copy_(
                        torch.tensor(a[p + "wh"], dtype=dt).reshape(h, 4 * h).t())
                    getattr(lstm, f"bias_ih_l{k}{sfx}").copy_(torch.tensor(a[p + "b"], dtype=dt))
                    getattr(lstm, f"bias_hh_l{k}{sfx}").zero_()
        packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=True,
                                      enforce_sorted=False)
        out_packed, (h_n, _) = lstm(packed)
        out, _ = pad_packed_sequence(out_packed, batch_first=True, total_length=steps)
        if pooling == "last":
            enc = torch.cat([h_n[-2], h_n[-1]], dim=1)
        else:
            enc = out.sum(dim=1) / torch.tensor(lengths, dtype=dt).unsqueeze(1)
        (enc * r).sum().backward()
        out_lines.append((f"{pooling}/enc", enc.detach().reshape(-1)))
        out_lines.append((f"{pooling}/outputs", out.detach().reshape(-1)))
        for k in range(layers):
            for d, sfx in (("fwd", ""), ("bwd", "_reverse")):
                p = f"{pooling}/l{k}/{d}/"
                out_lines.append((p + "wx", getattr(lstm, f"weight_ih_l{k}{sfx}").grad.t().reshape(-1)))
                out_lines.append((p + "wh", getattr(lstm, f"weight_hh_l{k}{sfx}").grad.t().reshape(-1)))
                out_lines.append((p + "b", getattr(lstm, f"bias_ih_l{k}{sfx}").grad.reshape(-1)))
    with open(sys.argv[2], "w") as f:
        for name, values in out_lines:
            f.write(name + " " + " ".join(repr(float(v)) for v in values.tolist()) + "\n")


if __name__ == "__main__":
    main()
