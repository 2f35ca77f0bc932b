"""`s3://` paths read as local ones do: the real shards uploaded to a local s3rver (started and
stopped by the test; scripts/install-s3rver.sh installs it, scripts/test.sh exports
REEL_S3RVER_DIR), read with reel.read_tfrecords, equal record by record to `reel inspect --json`
of the local files. The storage options come from REEL_STORAGE_S3_* variables, as for the
command (docs/python.md)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT, SHARDS, inspect_json, run_reel

S3RVER = ROOT / "scripts" / "s3rver.sh"
OPTIONS = {"addressing": "path", "region": "us-east-1", "access_key_id": "S3RVER",
           "secret_access_key": "S3RVER"}


@pytest.fixture()
def s3_endpoint(tmp_path):
    entry = pathlib.Path(os.environ.get("REEL_S3RVER_DIR", pathlib.Path.home() / ".cache/reel/s3rver"))
    if not (entry / "node_modules/s3rver/bin/s3rver.js").exists():
        pytest.skip("s3rver is not installed (scripts/install-s3rver.sh)")
    state = tmp_path / "s3rver"
    started = subprocess.run(["bash", str(S3RVER), "start", str(state), "shards"],
                             capture_output=True, text=True, check=True)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(S3RVER), "stop", str(state)], capture_output=True)


def test_s3_paths_read_as_local_ones(s3_endpoint):
    flags = [f"--storage=s3.{k}={v}" for k, v in {**OPTIONS, "endpoint": s3_endpoint}.items()]
    # Uploaded as a user would, with the AWS CLI; the command reads them back as a check.
    for shard in sorted(SHARDS.glob("*.tfrecord")):
        env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                   AWS_DEFAULT_REGION="us-east-1")
        subprocess.run(["aws", "--endpoint-url", s3_endpoint, "s3", "cp", str(shard),
                        f"s3://shards/yt8m/{shard.name}"], env=env, check=True,
                       capture_output=True)
    want = inspect_json(str(SHARDS / "*.tfrecord"))
    from_command = [json.loads(line) for line in run_reel(
        *flags, "inspect", "s3://shards/yt8m/*.tfrecord", "--json", "--limit", "100000"
    ).stdout.splitlines() if line.strip()]
    assert [r["id"] for r in from_command] == [r["id"] for r in want]
    # A fresh interpreter, so that the variables are there before reel creates its storages.
    env = dict(os.environ, **{f"REEL_STORAGE_S3_{k.upper()}": v
                              for k, v in {**OPTIONS, "endpoint": s3_endpoint}.items()})
    script = ("import json, reel\n"
              "for r in reel.read_tfrecords('s3://shards/yt8m/*.tfrecord', level='video'):\n"
              "    print(json.dumps([r['id'], r['labels'].tolist(), int(r['mean_rgb'].shape[0])]))\n")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(got) == len(want) == 902
    for g, w in zip(got, want):
        assert g == [w["id"], w["labels"], w["features"]["mean_rgb"]]
