#!/usr/bin/env python3
"""PyTorch DistributedDataParallel's side of the whole-job moe benchmark (bench/ddp/run_moe.py).

Run under torchrun, one process per rank (gloo backend):

  torchrun --nproc_per_node N bench/ddp/torch_moe_ddp.py --files A.tfrecord,B.tfrecord
      [--epochs 5] [--batch 32] [--experts 4] [--lr 0.005] [--threads T]

The same job as `reel train` of bench/ddp/moe.pbtxt: the YouTube-8M video-level records
(mean_rgb 1024 + mean_audio 128 floats, labels of 3862 classes), a mixture of `experts` sigmoid
experts per class plus a dummy expert under softmax gates (reel's moe, plugins/moe/README.md),
per-class sigmoid cross-entropy summed over classes and averaged over the batch, Adam, `batch`
examples per rank and step, the gradients averaged by DDP's allreduce.

Reading is the fastest pure-Python path written here: every rank reads the files once (the
framing without CRC checks, which reel makes) and decodes the tf.train.Example protos with a
minimal protobuf decoder into one NumPy array, then trains from memory, shuffling its share
(every N-th video) each epoch. Rank 0 prints one JSON line: the whole job's seconds (from
interpreter start to the end of training), the reading's, and the examples trained by all ranks.
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
import torch.nn.functional as F  # noqa: E402

# reel's moe head as the BiLSTM step benchmark writes it in PyTorch (gates without bias).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bilstm"))
from torch_step import MoeHead  # noqa: E402

CLASSES = 3862
RGB, AUDIO = 1024, 128


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


def decode_example(buf):
    """mean_rgb ++ mean_audio (float32[1152]) and the labels of one tf.train.Example."""
    features = {}
    for n, _, (b, e) in fields(buf, 0, len(buf)):  # Example.features = 1
        for n2, _, (fb, fe) in fields(buf, b, e):  # Features.feature = 1 (map entries)
            key = value = None
            for n3, _, (vb, ve) in fields(buf, fb, fe):
                if n3 == 1:
                    key = bytes(buf[vb:ve])
                else:
                    value = (vb, ve)
            features[key] = value
    def floats(name):
        b, e = features[name]
        for n, _, (lb, le) in fields(buf, b, e):  # Feature.float_list = 2
            for n2, wire, v in fields(buf, lb, le):  # FloatList.value = 1, packed
                return np.frombuffer(buf, dtype="<f4", count=(v[1] - v[0]) // 4, offset=v[0])
    labels = []
    b, e = features[b"labels"]
    for n, _, (lb, le) in fields(buf, b, e):  # Feature.int64_list = 3
        for n2, wire, v in fields(buf, lb, le):  # Int64List.value = 1, packed or not
            if wire == 2:
                i = v[0]
                while i < v[1]:
                    x, i = varint(buf, i)
                    labels.append(x)
            else:
                labels.append(v)
    return np.concatenate([floats(b"mean_rgb"), floats(b"mean_audio")]), labels


def read_tfrecords(paths):
    xs, ys = [], []
    for path in paths:
        data = memoryview(open(path, "rb").read())
        i = 0
        while i < len(data):
            (length,) = struct.unpack_from("<Q", data, i)
            record = data[i + 12:i + 12 + length]
            i += 12 + length + 4
            x, labels = decode_example(record)
            y = np.zeros(CLASSES, dtype=np.float32)
            y[labels] = 1.0
            xs.append(x)
            ys.append(y)
    return np.stack(xs), np.stack(ys)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--experts", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--threads", type=int, default=0, help="0: the cores over the local ranks")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    torch.set_num_threads(args.threads or max(1, len(os.sched_getaffinity(0)) // local))
    torch.manual_seed(1)
    read_start = time.time()
    x, y = read_tfrecords(args.files.split(","))
    x, y = torch.from_numpy(x[rank::world].copy()), torch.from_numpy(y[rank::world].copy())
    read_seconds = time.time() - read_start
    model = torch.nn.parallel.DistributedDataParallel(MoeHead(x.shape[1], CLASSES, args.experts))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(rank)
    steps_per_epoch = len(x) // args.batch  # every rank the same number of steps
    counts = torch.tensor([steps_per_epoch])
    dist.all_reduce(counts, op=dist.ReduceOp.MIN)
    steps_per_epoch = int(counts.item())
    train_start = time.time()
    loss = torch.tensor(0.0)
    for _ in range(args.epochs):
        order = torch.randperm(len(x), generator=generator)
        for s in range(steps_per_epoch):
            idx = order[s * args.batch:(s + 1) * args.batch]
            logits = model(x[idx])
            loss = F.binary_cross_entropy_with_logits(logits, y[idx], reduction="sum") / len(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    end = time.time()
    if rank == 0:
        examples = args.epochs * steps_per_epoch * args.batch * world
        print(json.dumps({"ranks": world, "threads": torch.get_num_threads(),
                          "whole_job_s": end - START, "read_s": read_seconds,
                          "train_s": end - train_start, "examples": examples,
                          "examples_per_sec_whole_job": examples / (end - START),
                          "examples_per_sec_training": examples / (end - train_start),
                          "final_loss": float(loss)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
