#!/usr/bin/env python3
"""PyTorch DistributedDataParallel's side of the whole-job benchmarks (bench/ddp/run.py).

Run under torchrun, one process per rank (gloo backend):

  torchrun --nproc_per_node N bench/ddp/torch_ddp.py --model moe|bilstm_video|two_stream
      --files A.tfrecord,B.tfrecord [--epochs E] [--steps S] [--batch 32] [--lr LR]
      [--experts K] [--threads T] [--mode padded|packed]

The same jobs as `reel train` of bench/ddp/<model>.pbtxt, the networks of plugins/moe/README.md
and plugins/bilstm/README.md: per-class sigmoid cross-entropy summed over the 3862 classes and
averaged over the batch, Adam, `batch` examples per rank and step, the gradients averaged by DDP's
allreduce.

- moe, on video-level records (mean_rgb 1024 + mean_audio 128 floats): `experts` (4) sigmoid
  experts per class plus a dummy under softmax gates. Every rank reads the files once into memory
  and trains `epochs` epochs from there, shuffling its share (every N-th video) each epoch.
- bilstm_video, two_stream, on frame-level records (docs/formats.md: per frame 1024 rgb and 128
  audio uint8-quantized bytes): a bidirectional LSTM (one layer; rgb 1024 -> 256 per direction,
  and for two_stream also audio 128 -> 128), the two directions' final states (concatenated,
  rgb before audio) into a moe head of `experts` (2). Every rank streams its share (every N-th
  record, in file order), dequantizes a batch at a time and trains on it, for at most `steps`
  steps (0: its whole share once) or until the step that ends `max-seconds` into the loop. `padded` runs the LSTM over the batch padded to its longest
  video (PyTorch's fast path) and takes the forward direction's output at each video's last
  frame and the backward direction's at frame 0 (which has run over the padding first: the
  padded loop is not exact); `packed` runs pack_padded_sequence (exact, 15-100x slower).

Reading is the fastest pure-Python path written here: the TFRecord framing without CRC checks
(which reel makes) and a minimal protobuf decoder, frames gathered with one NumPy index per
feature. Rank 0 prints one JSON line: the whole job's seconds (from interpreter start to the end
of training), the reading's, the steps', and the examples trained by all ranks.
"""
import argparse
import json
import os
import struct
import time

START = time.time()

import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

# reel's moe head as the BiLSTM step benchmark writes it in PyTorch (gates without bias).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bilstm"))
from torch_step import MoeHead  # noqa: E402

CLASSES = 3862
RGB, AUDIO = 1024, 128
# model: (level, [(feature, width, hidden)], default experts, default learning rate)
MODELS = {"moe": ("video", [], 4, 0.005),
          "bilstm_video": ("frame", [("rgb", RGB, 256)], 2, 0.001),
          "two_stream": ("frame", [("rgb", RGB, 256), ("audio", AUDIO, 128)], 2, 0.001)}


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def fields(buf, start, end):
    """(field number, wire type, value or (begin, end)) of a protobuf message's bytes."""
    i = start
    while i < end:
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 2:
            n, i = varint(buf, i)
            yield number, wire, (i, i + n)
            i += n
        elif wire == 0:
            v, i = varint(buf, i)
            yield number, wire, v
        elif wire == 5:
            yield number, wire, buf[i:i + 4]
            i += 4
        elif wire == 1:
            yield number, wire, buf[i:i + 8]
            i += 8
        else:
            raise ValueError(f"wire type {wire}")


def map_entries(buf, b, e):
    """{key bytes: (begin, end) of the value} of a proto map<string, message> (Features.feature,
    FeatureLists.feature_list: entries with the key as field 1 and the value as field 2)."""
    out = {}
    for _, _, (fb, fe) in fields(buf, b, e):
        key = value = None
        for n, _, (vb, ve) in fields(buf, fb, fe):
            if n == 1:
                key = bytes(buf[vb:ve])
            else:
                value = (vb, ve)
        out[key] = value
    return out


def features(buf, b, e):
    """Features (field 1 of Example, of SequenceExample's context) as map_entries."""
    for n, _, (fb, fe) in fields(buf, b, e):
        if n == 1:
            return map_entries(buf, fb, fe)
    return {}


def floats(buf, span):
    for _, _, (lb, le) in fields(buf, *span):  # Feature.float_list = 2
        for _, _, v in fields(buf, lb, le):  # FloatList.value = 1, packed
            return np.frombuffer(buf, dtype="<f4", count=(v[1] - v[0]) // 4, offset=v[0])


def labels_of(buf, span):
    labels = []
    for _, _, (lb, le) in fields(buf, *span):  # Feature.int64_list = 3
        for _, wire, v in fields(buf, lb, le):  # Int64List.value = 1, packed or not
            if wire == 2:
                i = v[0]
                while i < v[1]:
                    x, i = varint(buf, i)
                    labels.append(x)
            else:
                labels.append(v)
    return labels


def decode_example(buf):
    """mean_rgb ++ mean_audio (float32[1152]) and the labels of one tf.train.Example."""
    f = features(buf, 0, len(buf))
    return np.concatenate([floats(buf, f[b"mean_rgb"]), floats(buf, f[b"mean_audio"])]), \
        labels_of(buf, f[b"labels"])


def decode_sequence_example(buf, names):
    """The labels and, per feature name, the uint8 frames [T, width] of one SequenceExample."""
    context, lists = {}, {}
    for n, _, (b, e) in fields(buf, 0, len(buf)):
        if n == 1:  # context: Features
            context = map_entries(buf, b, e)
        elif n == 2:  # feature_lists: FeatureLists
            lists = map_entries(buf, b, e)
    whole = np.frombuffer(buf, dtype=np.uint8)
    frames = []
    for name, width in names:
        starts = []
        for _, _, (fb, fe) in fields(buf, *lists[name.encode()]):  # FeatureList.feature = 1
            for _, _, (bb, be) in fields(buf, fb, fe):  # Feature.bytes_list = 1
                for _, _, (vb, ve) in fields(buf, bb, be):  # BytesList.value = 1
                    if ve - vb != width:
                        raise ValueError(f"feature {name}: a frame of {ve - vb} bytes, not {width}")
                    starts.append(vb)
        starts = np.asarray(starts[:300])  # at most 300 frames, as reel (docs/formats.md)
        frames.append(whole[starts[:, None] + np.arange(width)])
    return labels_of(buf, context[b"labels"]), frames


def records(paths, every=1, first=0):
    """The payloads of the files' records in order, every `every`-th from the `first`-th."""
    k = 0
    for path in paths:
        data = memoryview(open(path, "rb").read())
        i = 0
        while i < len(data):
            (length,) = struct.unpack_from("<Q", data, i)
            if k % every == first:
                yield data[i + 12:i + 12 + length]
            k += 1
            i += 12 + length + 4


def count_records(paths):
    n = 0
    for path in paths:
        with open(path, "rb") as f:
            while header := f.read(12):
                (length,) = struct.unpack_from("<Q", header)
                f.seek(length + 4, os.SEEK_CUR)
                n += 1
    return n


def multi_hot(labels):
    y = np.zeros(CLASSES, dtype=np.float32)
    y[labels] = 1.0
    return y


class BiLstmModel(torch.nn.Module):
    """reel's bilstm_video / two_stream: one bidirectional LSTM per stream, the final states into
    the head. (torch.nn.LSTM has two bias vectors per direction where reel has one: 4 x hidden
    more parameters per direction, the same function.)"""

    def __init__(self, streams, experts, packed):
        super().__init__()
        self.packed = packed
        self.lstms = torch.nn.ModuleList(
            torch.nn.LSTM(w, h, batch_first=True, bidirectional=True) for _, w, h in streams)
        self.head = MoeHead(sum(2 * h for _, _, h in streams), CLASSES, experts)

    def forward(self, xs, lengths):
        enc = []
        for lstm, x in zip(self.lstms, xs):
            if self.packed:
                _, (h_n, _) = lstm(pack_padded_sequence(x, lengths, batch_first=True,
                                                        enforce_sorted=False))
                enc += [h_n[-2], h_n[-1]]
            else:
                out, _ = lstm(x)
                h = out.shape[-1] // 2
                enc += [out[torch.arange(len(x)), lengths - 1, :h], out[:, 0, h:]]
        return self.head(torch.cat(enc, dim=1))


def frame_batches(paths, names, batch, rank, world, skip=0):
    """Padded batches (list of [B, T, width] floats, lengths, labels) of this rank's share, after
    its first `skip` batches (passed over undecoded)."""
    pending = []
    for k, record in enumerate(records(paths, world, rank)):
        if k < skip * batch:
            continue
        pending.append(decode_sequence_example(record, names))
        if len(pending) == batch:
            lengths = torch.tensor([len(f[0]) for _, f in pending])
            t = int(lengths.max())
            xs = []
            for j in range(len(names)):
                q = torch.zeros(batch, t, names[j][1], dtype=torch.uint8)
                for i, (_, f) in enumerate(pending):
                    q[i, :len(f[j])] = torch.from_numpy(f[j])
                xs.append(q.float().mul_(4.0 / 255).add_(4.0 / 512 - 2.0))  # docs/formats.md
            y = torch.from_numpy(np.stack([multi_hot(l) for l, _ in pending]))
            yield xs, lengths, y
            pending = []


def gap_at_20(model, paths, names, k=20):
    """GAP@k (docs/metrics.md, as reel eval computes it) of `model` on the frame-level records
    of `paths`: every video's top k scores pooled, sorted, the average precision over all labels."""
    model.eval()
    scores, hits, labels = [], [], 0
    with torch.no_grad():
        for xs, lengths, y in frame_batches(paths, names, 1, 0, 1):
            top = torch.topk(torch.sigmoid(model(xs, lengths))[0], k)
            scores += top.values.tolist()
            hits += y[0][top.indices].tolist()
            labels += int(y[0].sum())
    order = np.argsort(-np.asarray(scores), kind="stable")
    h = np.asarray(hits)[order]
    precision = np.cumsum(h) / np.arange(1, len(h) + 1)
    return float((precision * h).sum() / max(labels, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="moe")
    ap.add_argument("--files", required=True)
    ap.add_argument("--epochs", type=int, default=5, help="moe: epochs over the data in memory")
    ap.add_argument("--steps", type=int, default=0,
                    help="bilstm: at most this many steps per rank (0: the rank's share once)")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="bilstm: stop after the step that ends this many seconds into the loop "
                    "(all ranks at the same step; 0: no limit)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--experts", type=int, default=0, help="0: the model's default")
    ap.add_argument("--lr", type=float, default=0.0, help="0: the model's default")
    ap.add_argument("--threads", type=int, default=0, help="0: the cores over the local ranks")
    ap.add_argument("--mode", choices=["padded", "packed"], default="padded")
    # DDP's own knobs (its documentation's tuning advice): the bucket size its overlapped
    # allreduce works in, and gradients kept as views into the buckets (one copy less per step).
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--gradient-as-bucket-view", action="store_true")
    ap.add_argument("--comm-hook", choices=["none", "fp16"], default="none",
                    help="fp16: DDP's fp16_compress_hook (the gradient in fp16 on the wire)")
    # TorchElastic's snapshot pattern (restart_time.py): rank 0 saves model, optimizer and step
    # every K steps; a (re)started worker loads the snapshot and goes on from its step.
    ap.add_argument("--snapshot", default="", help="frame level: the snapshot file")
    ap.add_argument("--snapshot-every", type=int, default=0, help="steps between snapshots")
    ap.add_argument("--step-log", default="",
                    help="rank 0 appends {step, wall_time, world} per step")
    ap.add_argument("--eval-files", default="",
                    help="frame level: rank 0 scores the trained model on these (GAP@20)")
    args = ap.parse_args()
    level, streams, experts, lr = MODELS[args.model]
    if args.snapshot and level != "frame":
        sys.exit("--snapshot: frame-level models only")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    torch.set_num_threads(args.threads or max(1, len(os.sched_getaffinity(0)) // local))
    if level == "frame":  # as reel's LSTM does (plugins/bilstm/README.md): PyTorch's faster
        torch.set_flush_denormal(True)
    torch.manual_seed(1)
    paths = args.files.split(",")
    if level == "video":
        read_start = time.time()
        pairs = [decode_example(r) for r in records(paths, world, rank)]
        x = torch.from_numpy(np.stack([p[0] for p in pairs]))
        y = torch.from_numpy(np.stack([multi_hot(p[1]) for p in pairs]))
        read_seconds = time.time() - read_start
        model = MoeHead(x.shape[1], CLASSES, args.experts or experts)
        share = len(x)
    else:
        read_seconds = 0.0
        model = BiLstmModel(streams, args.experts or experts, args.mode == "packed")
        share = len(range(rank, count_records(paths), world))
    params = sum(p.numel() for p in model.parameters())
    model = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=args.bucket_cap_mb,
        gradient_as_bucket_view=args.gradient_as_bucket_view)
    if args.comm_hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr or lr)
    steps_per_epoch = share // args.batch  # every rank the same number of steps
    if level == "frame" and args.steps:
        steps_per_epoch = min(steps_per_epoch, args.steps)
    counts = torch.tensor([steps_per_epoch])
    dist.all_reduce(counts, op=dist.ReduceOp.MIN)
    steps_per_epoch = int(counts.item())
    epochs = args.epochs if level == "video" else 1
    first = 0
    if args.snapshot and os.path.exists(args.snapshot):
        state = torch.load(args.snapshot)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first = state["step"]
    train_start = time.time()
    step_seconds = 0.0
    step_times = []
    loss = torch.tensor(0.0)
    steps = 0
    generator = torch.Generator().manual_seed(rank)
    for _ in range(epochs):
        if level == "video":
            order = torch.randperm(len(x), generator=generator)
            batches = ((x[order[s * args.batch:(s + 1) * args.batch]],
                        y[order[s * args.batch:(s + 1) * args.batch]])
                       for s in range(steps_per_epoch))
        else:
            batches = frame_batches(paths, [(n, w) for n, w, _ in streams], args.batch, rank, world,
                                    first)
        t0 = time.time()
        for s, b in zip(range(first, steps_per_epoch), batches):
            t1 = time.time()
            read_seconds += t1 - t0 if level == "frame" else 0.0
            logits = model(b[0]) if level == "video" else model(b[0], b[1])
            yb = b[-1]
            loss = F.binary_cross_entropy_with_logits(logits, yb, reduction="sum") / len(yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's allreduce runs inside, overlapped with the backward pass
            opt.step()
            t0 = time.time()
            step_times.append(t0 - t1)
            step_seconds += t0 - t1
            steps += 1
            if rank == 0 and args.step_log:
                with open(args.step_log, "a") as f:
                    f.write(json.dumps({"step": s + 1, "wall_time": t0, "world": world}) + "\n")
            if rank == 0 and args.snapshot_every and (s + 1) % args.snapshot_every == 0:
                torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                            "step": s + 1}, args.snapshot + ".tmp")
                os.replace(args.snapshot + ".tmp", args.snapshot)
            if level == "frame" and args.max_seconds:
                late = torch.tensor([int(t0 - train_start > args.max_seconds)])
                dist.all_reduce(late, op=dist.ReduceOp.MAX)
                if late.item():
                    break
                t0 = time.time()
    end = time.time()
    gap = None
    if rank == 0 and args.eval_files and level == "frame":
        gap = gap_at_20(model.module, args.eval_files.split(","), [(n, w) for n, w, _ in streams])
    if rank == 0:
        examples = steps * args.batch * world
        print(json.dumps({"model": args.model, "mode": args.mode, "ranks": world,
                          "threads": torch.get_num_threads(), "parameters": params,
                          "bucket_cap_mb": args.bucket_cap_mb,
                          "gradient_as_bucket_view": args.gradient_as_bucket_view,
                          "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "detected"),
                          "whole_job_s": end - START, "read_s": read_seconds,
                          "train_s": end - train_start, "step_s": step_seconds,
                          "steps": steps, "step_times_s": step_times,
                          "examples": examples,
                          "examples_per_sec_whole_job": examples / (end - START),
                          "examples_per_sec_training": examples / (end - train_start),
                          "final_loss": float(loss), "gap": gap}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
